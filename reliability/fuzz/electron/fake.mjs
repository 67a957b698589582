// The edge of Electron that the console's IPC binding and its sender check touch: ipcMain
// records handlers (refusing a second one per channel, as Electron does), shell does nothing.
export const handlers = new Map();
export const ipcMain = {
  handle(channel, handler) {
    if (handlers.has(channel)) throw new Error(`Attempted to register a second handler for '${channel}'`);
    handlers.set(channel, handler);
  },
  removeHandler(channel) {
    handlers.delete(channel);
  },
};
export const shell = { openExternal: async () => {} };
export default { ipcMain, shell };
