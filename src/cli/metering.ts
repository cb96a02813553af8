import { parseArgs } from 'node:util';
import { listPendingSettlements, resolveSettlement } from '../metering/index.ts';
import { parsePageQuery } from '../admin/index.ts';
import { ValidationFailure } from '../errors/index.ts';
import type { PageQuery } from '../store/index.ts';
import { EXIT, NotFoundError, ConflictError, UsageError } from './errors.ts';
import type { Command } from './command.ts';
import { tokenId } from './token-ref.ts';


/** The admin API's query rules (ISO times, limit 1..1000, cursors it issued), so a bad
 * --limit or --cursor is a usage error here too. --token is an id or a name, as everywhere in
 * the CLI: a name went through as an id, and the list answered empty with exit 0 (a billing
 * script read no usage); an unknown token is exit 3. */
async function pageArgs(store: Parameters<typeof tokenId>[0], args: string[]): Promise<PageQuery> {
  const { values } = parseArgs({ args, options: { token: { type: 'string' }, module: { type: 'string' }, from: { type: 'string' }, to: { type: 'string' }, limit: { type: 'string' }, cursor: { type: 'string' } } });
  if (values.token !== undefined) values.token = await tokenId(store, values.token);
  const names = { token: 'token_id', module: 'module_id', from: 'from', to: 'to', limit: 'limit', cursor: 'cursor' } as const;
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(values)) if (v !== undefined) params.set(names[k as keyof typeof names], v as string);
  try {
    return parsePageQuery(params);
  } catch (e) {
    if (e instanceof ValidationFailure) throw new UsageError(e.detail.map((d) => `--${String(d.loc[1]).replace('_id', '')}: ${d.msg}`).join('; '));
    throw e;
  }
}

export const meteringCommands: Record<string, Command> = {
  'ledger verify': {
    positional: 0,
    existingStore: true,
    usage: 'ledger verify   (recomputes every usage counter from the ledger; exit 1 on any mismatch)',
    async run(store, _args, ctx) {
      const check = await store.verifyLedger();
      if (!check.ok) ctx.exitCode = EXIT.failed;
      return check;
    },
  },
  'ledger list': { existingStore: true, usage: 'ledger list [--token ID|NAME] [--module ID] [--from ISO] [--to ISO] [--limit N] [--cursor C]', run: async (store, args) => store.listLedger(await pageArgs(store, args)) },
  'audit list': { existingStore: true, usage: 'audit list [--token ID|NAME] [--module ID] [--from ISO] [--to ISO] [--limit N] [--cursor C]', run: async (store, args) => store.listAudit(await pageArgs(store, args)) },
  'settlements list': { positional: 0, existingStore: true, usage: 'settlements list   (reservations whose settlement failed)', run: async (store) => ({ settlements: await listPendingSettlements(store) }) },
  'settlements resolve': {
    positional: 2,
    usage: 'settlements resolve <reservation_id> charge|refund',
    async run(store, [id, action]) {
      if (action !== 'charge' && action !== 'refund') throw new UsageError('action must be charge or refund');
      const r = await resolveSettlement(store, id ?? '', action);
      if (r === undefined) throw new NotFoundError(`unknown settlement ${id}`);
      if (r === 'not_pending') throw new ConflictError(`settlement ${id} is not pending`);
      return r;
    },
  },
};

