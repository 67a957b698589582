// Entry of the embedded reference worker when it runs as a thread (inside Electron, see
// embedded.ts): register the TypeScript loader, start the worker, report its url, stop when
// told. Worker threads do not inherit the loader of the thread that started them.
import { parentPort, workerData } from 'node:worker_threads';
import { register } from 'tsx/esm/api';

register();
const { startReferenceWorker } = await import('./server.ts');
try {
  const worker = await startReferenceWorker({ runtime: workerData.runtime, port: 0, modelPath: workerData.modelPath });
  parentPort.postMessage({ url: worker.url });
  parentPort.on('message', async (msg) => {
    if (msg !== 'stop') return;
    await worker.close();
    process.exit(0);
  });
} catch (err) {
  parentPort.postMessage({ error: String(err?.message ?? err) });
}
