import { parseArgs } from 'node:util';
import { listAudit, listLedger, listPendingSettlements, resolveSettlement, verifyLedger } from '../metering/index.ts';
import type { Command } from './main.ts';

class CliError extends Error {
  override name = 'CliError';
}

function pageArgs(args: string[]) {
  const { values } = parseArgs({ args, options: { token: { type: 'string' }, module: { type: 'string' }, limit: { type: 'string' }, cursor: { type: 'string' } } });
  return { token_id: values.token, module_id: values.module, limit: values.limit ? Number(values.limit) : undefined, cursor: values.cursor };
}

export const meteringCommands: Record<string, Command> = {
  'ledger verify': {
    usage: 'ledger verify   (recomputes every usage counter from the ledger; exit 1 on any mismatch)',
    async run(store) {
      const check = verifyLedger(store);
      if (!check.ok) {
        process.exitCode = 1;
        return check;
      }
      return check;
    },
  },
  'ledger list': { usage: 'ledger list [--token ID] [--module ID] [--limit N] [--cursor C]', run: async (store, args) => listLedger(store, pageArgs(args)) },
  'audit list': { usage: 'audit list [--token ID] [--module ID] [--limit N] [--cursor C]', run: async (store, args) => listAudit(store, pageArgs(args)) },
  'settlements list': { usage: 'settlements list   (reservations whose settlement failed)', run: async (store) => ({ settlements: listPendingSettlements(store) }) },
  'settlements resolve': {
    usage: 'settlements resolve <reservation_id> charge|refund',
    async run(store, [id, action]) {
      if (action !== 'charge' && action !== 'refund') throw new CliError('action must be charge or refund');
      const r = await resolveSettlement(store, id ?? '', action);
      if (r === undefined) throw new CliError(`unknown settlement ${id}`);
      if (r === 'not_pending') throw new CliError(`settlement ${id} is not pending`);
      return r;
    },
  },
};

export { CliError };
