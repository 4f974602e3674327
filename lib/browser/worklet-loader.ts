/**
 * Adds the browser module's worklet (`worklet.js`) to an AudioContext once. By default it is
 * loaded from beside this module, a URL that a page serving the package's files as they are
 * resolves, and that webpack 5 bundles as a worklet (`audioWorklet.addModule(new URL(...,
 * import.meta.url))`). With another bundler, pass the URL it gives the worklet module
 * (`rt-translate/browser/worklet`), for instance Vite's `?worker&url` import.
 */
const loaded = new WeakMap<BaseAudioContext, Map<string, Promise<void>>>();

export function loadWorklet(context: BaseAudioContext, url?: string | URL): Promise<void> {
  let byUrl = loaded.get(context);
  if (!byUrl) loaded.set(context, (byUrl = new Map()));
  const key = url === undefined ? '' : String(url);
  let done = byUrl.get(key);
  if (!done) {
    done = url === undefined ? context.audioWorklet.addModule(new URL('./worklet.js', import.meta.url)) : context.audioWorklet.addModule(url);
    byUrl.set(key, done);
    done.catch(() => byUrl.delete(key));
  }
  return done;
}
