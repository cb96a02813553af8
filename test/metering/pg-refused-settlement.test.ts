import t from 'tap';
import pg from 'pg';
import { postVerify, request, single } from '../helpers/captures.ts';
import { startPostgres } from '../helpers/postgres.ts';
import { startApi } from '../helpers/api.ts';
import { makeToken } from '../helpers/server.ts';

// A settlement PostgreSQL refuses (store SettleOutcome 'refused': the node's lease lapsed, or
// the reservation is no longer pending) answers 500 inference_failed and gives the units back.
// Over real HTTP and a real database: lv_units_total must say what the ledger says,
// a charge and its refund (the refund used to be missing from the metrics).
// The node is the service's app and engine in process (test/helpers/api.ts: the real
// PostgreSQL store, start-up steps and verify path, /metrics gathered as a process gathers it;
// issue 43: this was a server start): the settlement's outcome is the store's and the use
// case's, not the process's.

const server = await startPostgres();
t.teardown(() => server.stop());
const url = await server.database('refused_settlement');
const node = await startApi({ env: { DATABASE_URL: url }, engine: 'real', ready: true });
t.teardown(() => node.stop());

async function sql(text: string, values: unknown[] = []) {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query(text, values)).rows;
  } finally {
    await c.end();
  }
}

/** lv_units_total by kind, for rgb_liveness, from /metrics */
async function units(): Promise<{ charged: number; refunded: number }> {
  const text = await (await fetch(`${node.baseUrl}/metrics`)).text();
  const of = (kind: string) => {
    const line = text.split('\n').find((l) => l.startsWith('lv_units_total{') && l.includes('module="rgb_liveness"') && l.includes(`kind="${kind}"`));
    return line ? Number(line.split(' ').at(-1)) : 0;
  };
  return { charged: of('charged'), refunded: of('refunded') };
}

/** the ledger's units by kind, for rgb_liveness */
async function ledger(): Promise<{ charged: number; refunded: number }> {
  const rows = await sql(`SELECT kind, sum(units)::int AS units FROM ledger WHERE module_id = 'rgb_liveness' GROUP BY kind`);
  const of = (kind: string) => (rows.find((r) => r.kind === kind)?.units as number | undefined) ?? 0;
  return { charged: of('charge'), refunded: of('refund') };
}

t.test('a refused settlement: 500 inference_failed, its units back, counted refunded in the metrics as in the ledger', async (t) => {
  const refused = await makeToken(node, ['rgb_liveness:10:day']);
  const plain = await makeToken(node, ['rgb_liveness:10:day']);
  // the database refuses this token's settlements as it refuses one whose node lease lapsed:
  // lv_settle's UPDATE to charged changes no row (a trigger skips it), the refund goes through
  await sql(`
    CREATE FUNCTION test_refuse_settlement() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NULL; END $$;
    CREATE TRIGGER test_refuse_settlement BEFORE UPDATE OF state ON reservations FOR EACH ROW
      WHEN (NEW.state = 'charged' AND NEW.token_id = '${refused.id}') EXECUTE FUNCTION test_refuse_settlement()`);
  const before = await units();

  const r = await postVerify(node.baseUrl, refused.token, 'rgb_liveness', request([single({ id: 'refused-1' }), single({ id: 'refused-2' })]));
  t.equal(r.status, 500, r.text);
  t.equal(r.json?.error?.code, 'inference_failed');
  const ok = await postVerify(node.baseUrl, plain.token, 'rgb_liveness', request([single({ id: 'plain-1' })]));
  t.equal(ok.status, 200, ok.text);

  const rows = await sql('SELECT token_id, state, units FROM reservations ORDER BY token_id');
  t.same(rows.find((x) => x.token_id === refused.id), { token_id: refused.id, state: 'refunded', units: 2 }, 'the refused call\'s reservation is refunded');
  const used = await sql(`SELECT used FROM counters WHERE token_id = $1 AND period = 'day'`, [refused.id]);
  t.same(used.map((x) => Number(x.used)), [0], 'its units are back');

  const now = await units();
  const delta = { charged: now.charged - before.charged, refunded: now.refunded - before.refunded };
  t.same(await ledger(), { charged: 3, refunded: 2 }, 'the ledger: 3 units charged, the refused call\'s 2 refunded');
  t.same(delta, { charged: 3, refunded: 2 }, 'the metrics say the same');
});
