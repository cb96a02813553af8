import pg from 'pg';
import { hostName, hostUrl, type DatabaseHost, type DatabaseTarget } from '../../config/index.ts';
import { StoreUnavailableError } from '../errors.ts';

// Which host of DATABASE_URL this thread's pool connects to. `pg` 8 has no multi-host
// support (libpq's host=a,b and target_session_attrs are ignored), and the drivers that have
// it (postgres.js) would replace every statement of the store; so the pool keeps `pg` and its
// Client is given the host here: the last one found writable, or, after a connection to it
// failed, the first of the list that answers and accepts writes (probed all at once, in list
// order of preference, as libpq tries them). A standby promoted by an operator or by
// Patroni / a managed service's failover is found by the next connection after the old
// primary stops answering, with no restart.

/** Is this session on a primary that accepts writes? (libpq's read-write check, and
 * `primary`'s: a standby answers true to pg_is_in_recovery) */
const WRITABLE_SQL = `SELECT NOT pg_is_in_recovery() AND current_setting('transaction_read_only') = 'off' AS writable`;

/** a probe gives up on a host after this long: under the pool's 5 s connection timeout, so a
 * call waiting for a connection fails with the probe's reason, not a bare timeout */
const PROBE_TIMEOUT_MS = 1_500;
/** after a probe that found no writable host, calls fail at once for this long rather than
 * each probing the hosts again */
const PROBE_BACKOFF_MS = 200;
/** during an outage the hosts are probed this often even when no call asks, so the end of
 * the outage is seen (and the lease renewed, the writes owed made) within this much of it */
const HEAL_INTERVAL_MS = 500;

export interface HostEvents {
  /** the first failure of an outage: no writable host, or the current one stopped answering */
  down?(reason: string): void;
  /** connected again to a writable host after an outage that lasted `seconds` */
  recovered?(info: { seconds: number; host: string; previous: string | null; reason: string }): void;
}

export class HostSelector {
  private current: DatabaseHost | null;
  private probing: Promise<DatabaseHost> | null = null;
  private refusedUntil = 0;
  private refusal: StoreUnavailableError | null = null;
  /** since when (epoch ms, for a person; `began`: performance.now(), for its length) and why no
   * writable host has answered (`reason`: the first failure, `latest`: the last, e.g. what each
   * host answered the last probe); null while one does */
  outage: { since: number; began: number; reason: string; latest: string; previous: string | null } | null = null;
  /** a statement failed at the connection level: an outage only if a connection then fails
   * too (a single backend ended is a blip the pool absorbs), counted from here */
  private suspect: { since: number; began: number; reason: string } | null = null;
  private heal: NodeJS.Timeout | null = null;
  private healing = false;
  private closed = false;

  constructor(readonly target: DatabaseTarget, private readonly events: HostEvents = {}) {
    // one host that is not checked is used as it is, exactly as before several hosts existed
    this.current = target.hosts.length === 1 ? target.hosts[0]! : null;
  }

  get checkWritable(): boolean {
    return this.target.checkWritable;
  }

  /** the host the next connection goes to */
  async pick(): Promise<DatabaseHost> {
    if (this.current) return this.current;
    if (performance.now() < this.refusedUntil && this.refusal) throw this.refusal;
    this.probing ??= this.probe().finally(() => (this.probing = null));
    return this.probing;
  }

  /** a connection to `h` failed, or it no longer accepts writes: find the writable host again */
  failed(h: DatabaseHost, reason: string): void {
    this.down(`${hostName(h)}: ${reason}`, h);
    if (this.target.hosts.length > 1 || this.target.checkWritable) {
      if (this.current === h) this.current = null;
    }
  }

  /** a connection to `h` is up (and, where checked, writable) */
  connected(h: DatabaseHost): void {
    if (this.target.hosts.length > 1 || this.target.checkWritable) this.current = h;
    this.suspect = null;
    const was = this.outage;
    if (!was) return;
    this.outage = null;
    this.stopHealing();
    this.events.recovered?.({ seconds: (performance.now() - was.began) / 1000, host: hostName(h), previous: was.previous, reason: was.reason });
  }

  /** a statement succeeded: an outage that began with a statement failing on a connection
   * that was then replaced by one already pooled ends here, not only at a new connection */
  answered(): void {
    this.suspect = null;
    if (this.outage && this.current) this.connected(this.current);
  }

  /** a statement failed at the connection level (the server went away mid-call) */
  lost(reason: string): void {
    if (this.outage) this.outage.latest = reason;
    else this.suspect ??= { since: Date.now(), began: performance.now(), reason };
  }

  private down(reason: string, h: DatabaseHost | null): void {
    // a failure met while the store closes (its last DELETE) starts no outage, nor probes that
    // would outlive the store
    if (this.closed) return;
    if (this.outage) {
      this.outage.latest = reason;
      return;
    }
    const first = this.suspect ?? { since: Date.now(), began: performance.now(), reason };
    this.suspect = null;
    this.outage = { since: first.since, began: first.began, reason: first.reason, latest: reason, previous: h ? hostName(h) : null };
    this.events.down?.(reason);
    this.heal = setInterval(() => void this.tryHeal(), HEAL_INTERVAL_MS);
    this.heal.unref();
  }

  /** one probe of the host that would be used next (or of all, when none is known) */
  private async tryHeal(): Promise<void> {
    if (this.healing || !this.outage) return;
    this.healing = true;
    try {
      const h = await this.pick().catch(() => null);
      if (h && this.outage && (await probeHost(this.target, h)) === true) this.connected(h);
    } finally {
      this.healing = false;
    }
  }

  private stopHealing(): void {
    if (this.heal) clearInterval(this.heal);
    this.heal = null;
  }

  /** the store is closing: no more probes */
  close(): void {
    this.closed = true;
    this.stopHealing();
    this.outage = null;
  }

  private async probe(): Promise<DatabaseHost> {
    const answers = await Promise.all(this.target.hosts.map((h) => probeHost(this.target, h)));
    const i = answers.findIndex((a) => a === true);
    if (i !== -1) {
      this.refusal = null;
      return (this.current = this.target.hosts[i]!);
    }
    const reasons = this.target.hosts.map((h, k) => `${hostName(h)} ${answers[k] === false ? 'does not accept writes (a standby, or read-only)' : `does not answer (${answers[k] as string})`}`);
    const reason = `no writable PostgreSQL host: ${reasons.join('; ')}`;
    this.down(reason, null);
    this.refusal = new StoreUnavailableError(`store unavailable: ${reason}`, new Error(reason));
    // on the monotonic clock: a wall clock stepped back an hour during the back-off refused
    // every call of this node for that hour without probing again
    this.refusedUntil = performance.now() + PROBE_BACKOFF_MS;
    throw this.refusal;
  }
}

/** true: writable; false: answers but read-only; a string: why it did not answer */
async function probeHost(target: DatabaseTarget, h: DatabaseHost): Promise<true | false | string> {
  const c = new pg.Client({ connectionString: hostUrl(target, h), connectionTimeoutMillis: PROBE_TIMEOUT_MS, query_timeout: PROBE_TIMEOUT_MS, application_name: 'liveness-service probe' });
  c.on('error', () => {}); // a server that goes away after answering: nothing to do
  try {
    await c.connect();
    const r = await c.query(WRITABLE_SQL);
    return r.rows[0]?.writable === true;
  } catch (err) {
    const e = err as { code?: string; message?: string };
    return e.code ?? e.message ?? String(err);
  } finally {
    await c.end().catch(() => {});
  }
}

/** A `pg` Client class bound to a selector: each new connection of the pool goes to the
 * selector's host and, where checked, proves it accepts writes before the pool hands it out. */
export function selectingClient(selector: HostSelector): typeof pg.Client {
  return class SelectingClient extends pg.Client {
    // pg-pool connects with a callback; a plain caller may use the promise
    override connect(): Promise<pg.Client>;
    override connect(callback: ((err: Error) => void) | ((err: null, c: pg.Client) => void)): void;
    override connect(callback?: ((err: Error) => void) | ((err: null, c: pg.Client) => void)): Promise<pg.Client> | void {
      const run = this.open().then(() => this as pg.Client);
      if (!callback) return run;
      const cb = callback as (err: Error | null, c?: pg.Client) => void;
      run.then((c) => cb(null, c), (err: Error) => cb(err));
    }

    private async open(): Promise<void> {
      const h = await selector.pick();
      // the pool's connection timeout (5 s) may have fired while the hosts were probed: it
      // destroys the socket, which can then never connect
      if ((this as unknown as { connection: { stream: { destroyed?: boolean } } }).connection.stream.destroyed) {
        throw new StoreUnavailableError('store unavailable: no connection within the pool\'s timeout while the hosts were probed', new Error('timeout'));
      }
      // pg reads these when it opens the socket (Client._connect)
      const self = this as unknown as { host: string; port: number; connectionParameters: { host: string; port: number } };
      self.host = self.connectionParameters.host = h.host;
      self.port = self.connectionParameters.port = h.port;
      try {
        await super.connect();
      } catch (err) {
        selector.failed(h, (err as Error).message);
        throw new StoreUnavailableError(`store unavailable: ${hostName(h)}: ${(err as Error).message}`, err);
      }
      if (selector.checkWritable) {
        let writable = false;
        try {
          writable = (await this.query(WRITABLE_SQL)).rows[0]?.writable === true;
        } catch (err) {
          selector.failed(h, (err as Error).message);
          await this.end().catch(() => {});
          throw new StoreUnavailableError(`store unavailable: ${hostName(h)}: ${(err as Error).message}`, err);
        }
        if (!writable) {
          // the host was demoted (or is a standby): the next connection looks again
          selector.failed(h, 'no longer accepts writes');
          await this.end().catch(() => {});
          throw new StoreUnavailableError(`store unavailable: ${hostName(h)} does not accept writes (a standby, or read-only)`, new Error('read-only'));
        }
      }
      selector.connected(h);
    }
  } as unknown as typeof pg.Client;
}
