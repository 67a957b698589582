// Worker labels as the gateway derives them from GetModelInfo / GetServerInfo: absent,
// null and empty values make no label; lists become comma-separated text.
export function setLabel(labels: Record<string, string>, key: string, value: unknown): void {
  if (value === undefined || value === null || value === '') return;
  if (Array.isArray(value)) {
    if (value.length) labels[key] = value.join(',');
    return;
  }
  labels[key] = String(value);
}

/** The GetModelInfo fields both protocols share, as labels. */
export function modelLabels(labels: Record<string, string>, model: { modelPath: string; servedModelName: string; modelType: string; architectures: string[]; supportsVision: boolean }): void {
  setLabel(labels, 'model_path', model.modelPath);
  setLabel(labels, 'served_model_name', model.servedModelName);
  setLabel(labels, 'model_type', model.modelType);
  setLabel(labels, 'architectures', model.architectures);
  setLabel(labels, 'supports_vision', model.supportsVision ? 'true' : undefined);
}
