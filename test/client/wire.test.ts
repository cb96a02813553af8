import t from 'tap';
import { CAPTURE_PROFILE, ERROR_STATUS, MODULE_IDS, RGB8_BYTES } from '../../client/src/index.ts';
import { ERRORS } from '../../src/errors/index.ts';
import * as contract from '../../src/contract/index.ts';
import { CAPTURE_PROFILE as SERVICE_CAPTURE_PROFILE } from '../../src/packets/index.ts';

// The client package carries its own copy of the wire constants (it cannot import the
// service); this is where a drift between the two copies shows.
t.test('the package and the service declare the same error codes and statuses', async (t) => {
  t.same(ERROR_STATUS, Object.fromEntries(Object.entries(ERRORS).map(([code, e]) => [code, e.status])));
});

t.test('the package and the service agree on modules, profiles and the crop size', async (t) => {
  t.same(MODULE_IDS, contract.MODULE_IDS);
  t.same(CAPTURE_PROFILE, SERVICE_CAPTURE_PROFILE);
  t.equal(RGB8_BYTES, contract.RGB8_BYTES);
});

t.test('the package states the limits the service enforces', async (t) => {
  const { LIMITS } = await import('../../client/src/index.ts');
  const verify = (await import('../../src/http/routes/verify.ts')).LIMITS;
  const packets = await import('../../src/contract/index.ts');
  t.same(LIMITS, {
    bodyBytes: verify.maxBodyBytes,
    partBytes: verify.maxPartBytes,
    parts: verify.maxParts,
    capturesPerRequest: packets.MAX_CAPTURES_PER_REQUEST,
    eventsPerRequest: packets.MAX_EVENTS_PER_REQUEST,
    eventsPerCapture: packets.MAX_EVENTS_PER_CAPTURE,
    idempotencyKeyMaxLength: 200,
  });
});
