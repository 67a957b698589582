// The console a renderer test talks to: a ConsoleClient whose answers are the test's, held to
// what the real console could answer. Each call's input is checked as the backend checks it
// (parseCommandInput: a store that sends what the contract refuses gets invalid_input), each
// answer as the backend checks its handlers' (parseCommandOutput: an answer the real console
// could not give is an internal error naming where it is wrong), each stream payload by its
// stream's schema, and everything crosses as JSON, errors rebuilt by errorFromWire, as over
// the HTTP binding. A command the test gives no answer for is not_found, naming it.
import {
  ContractError,
  errorFromWire,
  parseCommandInput,
  parseCommandOutput,
  streams,
  type CommandInput,
  type CommandName,
  type CommandOutput,
  type ConsoleClient,
  type StreamName,
  type StreamPayload,
} from '../../../core/console/contract.ts';

/** What the test's console answers to a command: its output, or a ContractError thrown. */
export type Answer<C extends CommandName> = (input: CommandInput<C>) => CommandOutput<C> | Promise<CommandOutput<C>>;
export type Answers = { [C in CommandName]?: Answer<C> };

export interface FakeConsole {
  client: ConsoleClient;
  /** Every call, in order, with its input as sent. */
  calls: Array<{ command: CommandName; input: unknown }>;
  /** The inputs of every call of one command, in order. */
  inputsOf<C extends CommandName>(command: C): Array<CommandInput<C>>;
  /** Answer `command` from now on with `answer`. */
  answer<C extends CommandName>(command: C, answer: Answer<C>): void;
  /** Send a stream payload to the page's listeners (checked by its stream's schema first). */
  emit<S extends StreamName>(stream: S, payload: StreamPayload<S>): void;
  /** How many listeners a stream has now. */
  listening(stream: StreamName): number;
}

const overJson = (value: unknown): unknown => (value === undefined ? undefined : JSON.parse(JSON.stringify(value)));

export function fakeConsole(initial: Answers = {}): FakeConsole {
  const answers = new Map<CommandName, (input: never) => unknown>(Object.entries(initial) as Array<[CommandName, (input: never) => unknown]>);
  const listeners = new Map<StreamName, Set<(payload: unknown) => void>>();
  const calls: FakeConsole['calls'] = [];

  const client: ConsoleClient = {
    async call<C extends CommandName>(command: C, input: CommandInput<C>): Promise<CommandOutput<C>> {
      calls.push({ command, input });
      try {
        const parsed = parseCommandInput(command, overJson(input));
        const answer = answers.get(command) as Answer<C> | undefined;
        if (!answer) throw new ContractError('not_found', `the test's console has no answer for ${command}`);
        return overJson(parseCommandOutput(command, await answer(parsed as CommandInput<C>))) as CommandOutput<C>;
      } catch (err) {
        // As the backend: a ContractError crosses as it is, anything else as internal with its message.
        const thrown = err instanceof ContractError ? err : new ContractError('internal', (err as Error).message);
        throw errorFromWire(overJson(thrown.toWire()));
      }
    },
    subscribe<S extends StreamName>(stream: S, listener: (payload: StreamPayload<S>) => void): () => void {
      const set = listeners.get(stream) ?? new Set();
      listeners.set(stream, set);
      const entry = (p: unknown) => listener(p as StreamPayload<S>);
      set.add(entry);
      return () => set.delete(entry);
    },
  };

  return {
    client,
    calls,
    inputsOf: <C extends CommandName>(command: C) => calls.filter((c) => c.command === command).map((c) => c.input as CommandInput<C>),
    answer(command, answer) {
      answers.set(command, answer);
    },
    emit(stream, payload) {
      const checked = overJson(streams[stream].parse(payload));
      for (const l of [...(listeners.get(stream) ?? [])]) l(checked);
    },
    listening: (stream) => listeners.get(stream)?.size ?? 0,
  };
}
