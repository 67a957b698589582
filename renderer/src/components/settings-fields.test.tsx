// The settings forms as the operator reads them with a draft holding what they typed: every
// field's problem under the field, naming the setting and the value in the setting's unit
// (the schema's sentence), and the pending bar naming every problem it counts. Rendered from
// the stores' state (test/render.tsx); Discard following into the fields, which needs a
// browser's effects, is e2e/settings.spec.ts.
import { describe, expect, it } from 'vitest';
import { issuesFromZod, RouterConfigSchema, type RouterConfig } from '../../../core/console/contract.ts';
import { render, withState } from '../test/render.tsx';
import { configView, routerConfig, WORKER_A, workerView } from '../test/samples.ts';
import { useConfig } from '../stores/config.ts';
import { useWorkers } from '../stores/workers.ts';
import { RouterScreen } from '../screens/Router.tsx';
import { WorkerEditor } from '../screens/Workers.tsx';
import { PendingBar } from './PendingBar.tsx';

const view = configView();
/** The applied configuration with what the operator typed over it, as the draft holds it. */
const typed = (over: Record<string, unknown>): RouterConfig => ({ ...view.config, ...over });
const issuesOf = (draft: RouterConfig) => {
  const checked = RouterConfigSchema.safeParse(draft);
  return checked.success ? [] : issuesFromZod(checked.error, { input: draft }).map(({ path, message }) => ({ path, message }));
};
const routerWith = (over: Record<string, unknown>) =>
  render(<RouterScreen />, withState(useConfig, { view, draft: typed(over), base: { revision: 1, config: view.config }, issues: [] })).text;

describe('a field names its own problem: the setting, the value, what is expected in its unit', () => {
  it('a list (allowed_media_domains) and a map (limit_mm_per_prompt) are checked under their fields', () => {
    const text = routerWith({ allowed_media_domains: ['images.example.com', 'https://evil.example'], limit_mm_per_prompt: { image: -1 } });
    expect(text).toContain(
      "invalid value 'https://evil.example' for allowed_media_domains[1]: expected a host name such as images.example.com (no scheme, port, path or wildcard)",
    );
    expect(text).toContain('invalid value -1 for limit_mm_per_prompt.image: expected a whole number of images, 0 or more');
  });

  it('pixels are pixels, not bytes', () => {
    expect(routerWith({ max_request_image_pixels: 0 })).toContain(
      'invalid value 0 for max_request_image_pixels: expected a positive integer number of pixels (width × height, e.g. 64000000)',
    );
  });

  it('a negative threshold is a number out of range, not "not a number"', () => {
    const text = routerWith({ multimodal_shm_min_bytes: -1 });
    expect(text).toContain('invalid value -1 for multimodal_shm_min_bytes: expected a non-negative integer number of bytes (e.g. 65536)');
    expect(text).not.toContain('is not a number');
  });

  it('a blank setting with a default is refused by name, never a blank field over the default', () => {
    const text = routerWith({ body_timeout_secs: '', request_timeout_secs: '' });
    expect(text).toContain("invalid value '' for body_timeout_secs: expected a number of seconds from 1 to 3600");
    expect(text).toContain("invalid value '' for request_timeout_secs: expected a number of seconds from 1 to 86400");
  });

  it('an exponent is text in every number field, named as such', () => {
    expect(routerWith({ max_body_bytes: '1e6', request_timeout_secs: '1e3' })).toContain(
      "invalid value '1e3' for request_timeout_secs: expected a number of seconds from 1 to 86400",
    );
  });

  it("a worker's priority left blank, and a label name too long, are named under their fields", () => {
    const config = routerConfig({ workers: [{ url: WORKER_A }] });
    const draft = { ...config, workers: [{ ...config.workers[0]!, priority: '', labels: { ['n'.repeat(70)]: '1' } }] } as unknown as RouterConfig;
    const { text } = render(
      <WorkerEditor url={WORKER_A} onClose={() => undefined} />,
      withState(useConfig, { view: configView({ config }), draft, base: { revision: 1, config } }),
      withState(useWorkers, { loaded: true, workers: [workerView(WORKER_A)] }),
    );
    expect(text).toContain("invalid value '' for priority: expected an integer priority 0-100");
    expect(text).toContain(`invalid key '${'n'.repeat(70)}' (70 characters) in labels: expected a string label name of 1 to 63 characters`);
  });
});

describe('the pending bar', () => {
  it('names every problem it counts', () => {
    const draft = typed({ allowed_media_domains: ['https://evil.example'], limit_mm_per_prompt: { image: -1 } });
    const issues = issuesOf(draft);
    expect(issues).toHaveLength(2);
    const { text } = render(<PendingBar />, withState(useConfig, { view, draft, base: { revision: 1, config: view.config }, issues }));
    expect(text).toContain('2 problems:');
    for (const issue of issues) expect(text).toContain(issue.message);
  });
});
