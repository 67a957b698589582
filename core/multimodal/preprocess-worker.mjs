// Entry of a preprocessing pool thread. Worker threads do not inherit the TypeScript loader
// of the thread that started them, so register tsx here before loading the task module.
import { parentPort } from 'node:worker_threads';
import { register } from 'tsx/esm/api';

register();
const { runPreprocessTask } = await import('./preprocess-task.ts');

parentPort.on('message', async ({ id, task }) => {
  try {
    const result = await runPreprocessTask(task);
    const transfer = [result.pixelValues.buffer];
    if (result.bf16) transfer.push(result.bf16.buffer);
    parentPort.postMessage({ id, result }, transfer);
  } catch (err) {
    parentPort.postMessage({ id, error: { name: err?.name ?? 'Error', message: String(err?.message ?? err) } });
  }
});
