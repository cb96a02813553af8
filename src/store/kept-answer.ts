// What an operator's "charge" makes of a settlement_failed reservation's kept answer
// (`unsaved_body`): the answer the call could not save, rendered by the verify use case, whose
// `results` the settlement would have stored beside it. Charging it must store them too: a
// backend reads a device session's verdict from the stored results (GET /v1/sessions/{id},
// src/sessions), and the console's results page reads the same record.

/** The result records of a kept answer; `undefined` when it has none to give (no kept answer,
 * or a body that is not the service's answer: nothing is invented). */
export function keptResults(body: string | null): unknown[] | undefined {
  if (body === null) return undefined;
  let answer: unknown;
  try {
    answer = JSON.parse(body);
  } catch {
    return undefined;
  }
  const results = (answer as { results?: unknown } | null)?.results;
  return Array.isArray(results) ? results : undefined;
}
