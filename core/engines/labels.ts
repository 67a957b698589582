// Worker labels as the gateway derives them from GetModelInfo / GetServerInfo: absent,
// null and empty values make no label; lists become comma-separated text.
import { SAMPLING_DEFAULTS_LABEL } from './sampling.ts';

export function setLabel(labels: Record<string, string>, key: string, value: unknown): void {
  if (value === undefined || value === null || value === '') return;
  if (Array.isArray(value)) {
    if (value.length) labels[key] = value.join(',');
    return;
  }
  labels[key] = String(value);
}

/** The GetModelInfo fields every protocol shares, as labels (the model's sampling defaults among them: sampling.ts). */
export function modelLabels(
  labels: Record<string, string>,
  model: { modelPath: string; servedModelName: string; modelType: string; architectures: string[]; supportsVision: boolean; defaultSamplingParamsJson: string },
): void {
  setLabel(labels, 'model_path', model.modelPath);
  setLabel(labels, 'served_model_name', model.servedModelName);
  setLabel(labels, 'model_type', model.modelType);
  setLabel(labels, 'architectures', model.architectures);
  setLabel(labels, 'supports_vision', model.supportsVision ? 'true' : undefined);
  setLabel(labels, SAMPLING_DEFAULTS_LABEL, model.defaultSamplingParamsJson);
}
