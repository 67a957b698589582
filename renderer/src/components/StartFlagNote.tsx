// A setting a flag gave at start: the change is applied now and written to the file, but a
// restart with that flag sets it again (config.get's startFlags). Router settings and the
// generic settings table show it next to the setting.
import { startFlagFor, type ConfigView } from '../../../core/console/contract.ts';

/** A setting a flag gave at start: a change is written to the file, but a restart with that flag sets it again. */
export function StartFlagNote({ view, setting }: { view: ConfigView; setting: string }) {
  const flag = startFlagFor(view.startFlags, setting);
  if (!flag) return null;
  return (
    <p className="note note-info small" data-testid={`start-flag-${setting}`}>
      The router was started with <code className="nowrap">{flag.flag}</code>. A change here is applied now and written to the file, but a restart with that
      flag sets it again.
    </p>
  );
}
