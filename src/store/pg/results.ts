import type { StoredResults } from '../backend.ts';
import type { Pg } from './open.ts';

export async function getResults(db: Pg, requestId: string): Promise<StoredResults | undefined> {
  const r = await db.pool.query<{ record: StoredResults }>('SELECT record FROM results WHERE request_id = $1', [requestId]);
  return r.rows[0]?.record;
}
