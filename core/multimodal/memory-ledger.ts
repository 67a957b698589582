// The preprocessing memory budget (preprocess_memory_bytes) as one ledger: every byte
// preprocessing takes is reserved, leased and released here, and nowhere else.
//
// What the budget bounds is what preprocessing keeps resident: its arena of shared memories
// (shared-memory-arena.ts; used or kept for reuse: it never shrinks) plus the decoders' buffers
// of the images being processed. An image's cost comes from its header:
//
//   reserve(cost)   an image that could never fit (its cost alone is above the budget) is
//                   refused, with the bytes it needs and the budget; any other waits, in order.
//   leaseNext()     the first waiting image starts when its share fits beside what is resident
//                   (or when nothing else is being processed): its bytes are counted, and its
//                   arena memory is taken. Nothing overtakes it, so nothing starves.
//   finish(keep)    the thread's result is in: the decoder's buffers go back, and the shared
//                   memory too unless the result lives in it (keep) until the caller is done.
//   release()       everything the reservation still holds goes back; a second call does nothing.
//
// borrow() leases arena memory outside any image (a pixel-cache hit read for inline), counted
// the same way and released the same way.
import { SharedMemoryArena } from './shared-memory-arena.ts';
import type { SharedWasmMemory } from './resize-simd.ts';

/** What an image holds while it is processed. */
export interface MemoryCost {
  /** Its arena memory (a size class), until the caller releases the result that lives in it. */
  shared: number;
  /** The decoder's buffers, until the thread's result. */
  transient: number;
  /** Bytes of arena memory to work in (the outputs and the resize); absent: the thread works in its own memory. */
  arenaBytes?: number;
}

/** An image that alone needs more than the budget. */
export interface MemoryRefusal {
  needs: number;
  budget: number;
}

/** What the pool reports (metrics and tests): bytes counted, kept for reuse, the arena's size and what is resident by the budget's rule. */
export interface MemoryUse {
  budget: number;
  inUse: number;
  pooled: number;
  arena: number;
  resident: number;
}

type State = 'waiting' | 'leased' | 'kept' | 'released';

/** The ledger's way to lease a reservation: module-private, so only the ledger counts one as leased. */
const lease = Symbol('lease');

/** How a reservation reports back to its ledger (closures over the ledger's private counters). */
interface Book {
  returned(transient: number, shared: number, memory: SharedWasmMemory | undefined, sizeWhenTaken: number): void;
  withdraw(reservation: Reservation<unknown>): void;
}

/** An image's claim on the budget, from reserve() to release(). `holder`: what waits for it (the pool's job). */
export class Reservation<T> {
  private state: State = 'waiting';
  private sizeWhenTaken = 0;
  private arenaMemory: SharedWasmMemory | undefined;

  constructor(
    private readonly book: Book,
    readonly cost: MemoryCost,
    readonly holder: T,
  ) {}

  /** The arena memory it works in, once leased (undefined: none asked for, or the arena had no room). */
  get memory(): SharedWasmMemory | undefined {
    return this.arenaMemory;
  }

  /** Counted from now (by the ledger, which passes the memory it took for it). */
  [lease](memory: SharedWasmMemory | undefined, state: 'leased' | 'kept'): void {
    if (this.state !== 'waiting') return;
    this.state = state;
    this.arenaMemory = memory;
    this.sizeWhenTaken = memory?.buffer.byteLength ?? 0;
  }

  /**
   * The task is over: its decoder's buffers go back, and its shared memory too unless `keep`
   * (the result lives in it until release()). A reservation still waiting just leaves the
   * queue; one already finished stays as it is.
   */
  finish(keep: boolean): void {
    if (this.state === 'waiting') {
      this.state = 'released';
      this.book.withdraw(this);
      return;
    }
    if (this.state !== 'leased') return;
    const giveMemory = !keep || this.arenaMemory === undefined;
    this.state = giveMemory ? 'released' : 'kept';
    this.book.returned(this.cost.transient, giveMemory ? this.cost.shared : 0, giveMemory ? this.arenaMemory : undefined, this.sizeWhenTaken);
  }

  /** Everything it still holds goes back (at most once, however often this is called). */
  release(): void {
    if (this.state === 'kept') {
      this.state = 'released';
      this.book.returned(0, this.cost.shared, this.arenaMemory, this.sizeWhenTaken);
    } else this.finish(false);
  }
}

export class MemoryLedger<T> {
  private readonly arena: SharedMemoryArena;
  private readonly waitingList: Array<Reservation<T>> = [];
  /** Bytes of leased reservations (images being processed, results not yet released, borrowed memory). */
  private leasedBytes = 0;
  /** Of those, the decoders' buffers of images being processed. */
  private transientBytes = 0;
  private readonly book: Book = {
    returned: (transient, shared, memory, sizeWhenTaken) => {
      this.transientBytes -= transient;
      if (memory) this.arena.release(memory, sizeWhenTaken);
      this.leasedBytes -= transient + shared;
      this.onReturn();
    },
    withdraw: (reservation) => {
      const at = this.waitingList.findIndex((r) => r === reservation);
      if (at >= 0) this.waitingList.splice(at, 1);
    },
  };

  constructor(
    private budgetBytes: number,
    /** Called after memory comes back (not after a waiting reservation withdraws: it held nothing). */
    private readonly onReturn: () => void = () => {},
  ) {
    this.arena = new SharedMemoryArena(budgetBytes);
  }

  get budget(): number {
    return this.budgetBytes;
  }

  /** A lower budget applies to reservations leased from now on (the arena never shrinks). */
  setBudget(bytes: number): void {
    this.budgetBytes = bytes;
    this.arena.cap = Math.max(this.arena.cap, bytes);
  }

  /** Reservations waiting to be leased. */
  get waiting(): number {
    return this.waitingList.length;
  }

  use(): MemoryUse {
    return {
      budget: this.budgetBytes,
      inUse: this.leasedBytes,
      pooled: this.arena.pooled,
      arena: this.arena.created,
      resident: this.arena.created + this.transientBytes,
    };
  }

  /** A reservation that waits its turn, or the refusal of a cost above the whole budget. */
  reserve(cost: MemoryCost, holder: T): { reservation: Reservation<T> } | { refusal: MemoryRefusal } {
    const needs = cost.shared + cost.transient;
    if (needs > this.budgetBytes) return { refusal: { needs, budget: this.budgetBytes } };
    const reservation = new Reservation(this.book, cost, holder);
    this.waitingList.push(reservation);
    return { reservation };
  }

  /**
   * The first waiting reservation, leased, when its share fits beside what is resident now:
   * the arena (grown by its share unless a free memory holds it) and the decoders' buffers of
   * the images being processed. `alone`: nothing else is being processed, so it starts
   * whatever the arena holds (its cost alone fits the budget). Undefined: none waits, or the
   * first must wait for memory to come back.
   */
  leaseNext(alone: boolean): Reservation<T> | undefined {
    const head = this.waitingList[0];
    if (!head) return undefined;
    const { shared, transient, arenaBytes } = head.cost;
    const grows = this.arena.fitsFree(shared) ? 0 : shared;
    if (!alone && this.arena.created + this.transientBytes + grows + transient > this.budgetBytes) return undefined;
    this.waitingList.shift();
    this.leasedBytes += shared + transient;
    this.transientBytes += transient;
    head[lease](arenaBytes === undefined ? undefined : this.arena.acquire(arenaBytes), 'leased');
    return head;
  }

  /**
   * Arena memory for `bytes` outside any image, leased at once and kept until release() (no
   * budget check beyond the arena's cap). Undefined when the arena has no room now.
   */
  borrow(bytes: number): { memory: SharedWasmMemory; release: () => void } | undefined {
    const memory = this.arena.acquire(bytes);
    if (!memory) return undefined;
    const reservation = new Reservation(this.book, { shared: memory.buffer.byteLength, transient: 0 }, undefined);
    this.leasedBytes += memory.buffer.byteLength;
    reservation[lease](memory, 'kept');
    return { memory, release: () => reservation.release() };
  }

  /** Every reservation still waiting, withdrawn (the pool is closing): their holders are told. */
  withdrawWaiting(): Array<Reservation<T>> {
    const waiting = [...this.waitingList];
    for (const reservation of waiting) reservation.finish(false);
    return waiting;
  }

  /** Hand the free arena memories' pages back to the system; returns the bytes released. */
  releasePages(): number {
    return this.arena.releasePages();
  }
}
