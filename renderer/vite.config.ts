// The renderer build: one index.html plus hashed assets in dist/renderer/, loaded over http by
// `mmtc serve` and over the mmtc-app:// scheme by Electron. Relative asset paths (base './')
// work under both; no inline script or style is emitted, so the strict CSP holds.
import react from '@vitejs/plugin-react';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

const root = fileURLToPath(new URL('.', import.meta.url));

export default defineConfig({
  root,
  base: './',
  plugins: [react()],
  build: {
    outDir: fileURLToPath(new URL('../dist/renderer', import.meta.url)),
    emptyOutDir: true,
    modulePreload: { polyfill: false },
    assetsInlineLimit: 0,
    sourcemap: false,
    chunkSizeWarningLimit: 1200,
  },
  server: { fs: { allow: [fileURLToPath(new URL('..', import.meta.url))] } },
});
