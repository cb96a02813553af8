// The fair-share rule of the host's verify slots (src/http/capacity.ts), on the shared table
// itself: two HostAdmission instances on one SharedArrayBuffer stand for two API workers.
// Through the real server: fair-capacity.test.ts.

import fc from 'fast-check';
import t from 'tap';
import { HostAdmission, addressKey, createAdmissionTable, type AdmissionSlot } from '../../src/http/capacity.ts';
import { waitFor } from '../helpers/wait.ts';

function host(slots = 4, caps: { perAddress?: number; perToken?: number } = {}) {
  const buffer = createAdmissionTable(slots);
  const limits = { slots, perAddress: caps.perAddress ?? slots, perToken: caps.perToken ?? slots };
  return [new HostAdmission(buffer, 0, limits), new HostAdmission(buffer, 1, limits)] as const;
}

interface Upload {
  slot: AdmissionSlot;
  revoked: boolean;
}

/** An upload that takes a slot on `worker` and records its revocation. */
function upload(worker: HostAdmission, address: string, token: string): Upload | string {
  const u = { revoked: false } as Upload;
  const slot = worker.acquire(address, token, () => (u.revoked = true));
  if (typeof slot === 'string') return slot;
  u.slot = slot;
  return u;
}

function held(x: Upload | string): Upload {
  if (typeof x === 'string') throw new Error(`refused: ${x}`);
  return x;
}

t.test('addressKey: IPv4 as is, IPv6 by its /64 however it is written', async (t) => {
  t.equal(addressKey('198.51.100.7'), '198.51.100.7');
  const same = ['2001:db8:1:2::1', '2001:db8:1:2:ffff:ffff:ffff:ffff', '2001:0DB8:0001:0002:0:0:0:9', '2001:db8:1:2::5%eth0', '2001:db8:1:2:0:0:1.2.3.4'];
  for (const a of same) t.equal(addressKey(a), '2001:db8:1:2::/64', a);
  t.not(addressKey('2001:db8:1:3::1'), addressKey('2001:db8:1:2::1'), 'the next /64 is another network');
  t.equal(addressKey('::1'), '0:0:0:0::/64');
  t.equal(addressKey('fe80::1'), 'fe80:0:0:0::/64');
  t.equal(addressKey('::ffff:1.2.3.4'), '0:0:0:0::/64');
});

t.test('a lone tenant takes every slot; nobody is revoked for it', async (t) => {
  const [w0, w1] = host();
  const ups = [upload(w0, '198.51.100.1', 'A'), upload(w1, '198.51.100.1', 'A'), upload(w0, '198.51.100.1', 'A'), upload(w1, '198.51.100.1', 'A')].map(held);
  t.equal(w0.inUse(), 4);
  // (the caps default to every slot, so the cap is what says no here)
  t.equal(upload(w0, '198.51.100.2', 'A'), 'token', 'its fifth call is refused, not served by revoking itself');
  t.equal(upload(w1, '198.51.100.1', 'B'), 'address', 'a call from its address is refused too (the address holds them all)');
  t.equal(w0.revocations(), 0);
  for (const u of ups) u.slot.release();
  t.equal(w0.inUse(), 0);
});

t.test('a caller holding none takes the oldest upload of the caller holding the most; max-min shares, no trading back', async (t) => {
  const [w0, w1] = host();
  const a = [upload(w0, '198.51.100.1', 'A'), upload(w1, '198.51.100.2', 'A'), upload(w0, '198.51.100.3', 'A'), upload(w1, '198.51.100.1', 'A')].map(held);
  const b1 = held(upload(w1, '203.0.113.1', 'B'));
  t.equal(w0.inUse(), 4, 'the slot changed hands: still four in use');
  await waitFor(() => a[0]!.revoked, { what: 'the oldest upload of token A to be told', timeoutMs: 5_000 });
  t.same(a.map((u) => u.revoked), [true, false, false, false], 'only the oldest upload of A');
  t.notOk(a[0]!.slot.uploaded(), 'the revoked upload cannot complete');
  a[0]!.slot.release();
  t.equal(w0.inUse(), 4, 'its release gives back nothing: the slot is B\'s');

  const b2 = held(upload(w0, '203.0.113.2', 'B'));
  await waitFor(() => a[1]!.revoked, { what: 'the next oldest of A', timeoutMs: 5_000 });
  t.same([a[2]!.revoked, a[3]!.revoked], [false, false]);
  // A 2, B 2: each at its share
  t.equal(upload(w1, '203.0.113.3', 'B'), 'host', 'B at its share asking for more is refused');
  t.equal(upload(w1, '198.51.100.9', 'A'), 'host', 'A at its share is refused');
  const c = held(upload(w0, '192.0.2.1', 'C'));
  await waitFor(() => a[2]!.revoked || b1.revoked, { what: 'one of the 2-slot callers to give way to C', timeoutMs: 5_000 });
  t.ok(a[2]!.revoked, 'of two callers at load 2, the older upload gives way');
  t.equal(upload(w0, '192.0.2.2', 'C'), 'host', 'C at 1 does not take from callers at 2 (no trading back)');
  t.equal(w0.revocations(), 3);
  for (const u of [a[1]!, a[2]!, a[3]!, b1, b2, c]) u.slot.release();
  t.equal(w0.inUse(), 0);
});

t.test('an address is one caller across tokens, and an IPv6 /64 is one address', async (t) => {
  const [w0, w1] = host();
  const net = ['2001:db8:7:7::1', '2001:db8:7:7::2', '2001:db8:7:7:a::3', '2001:db8:7:7:b::4'];
  const ups = net.map((addr, i) => held(upload(i % 2 ? w1 : w0, addr, `T${i}`)));
  // every slot has its own token and its own address, but one /64: the network holds 4
  const honest = held(upload(w1, '2001:db8:8:8::1', 'H'));
  await waitFor(() => ups[0]!.revoked, { what: 'the /64\'s oldest upload to give way', timeoutMs: 5_000 });
  t.equal(upload(w0, '2001:db8:7:7::99', 'T9'), 'host', 'another address of the same /64 with a fresh token is still that network: refused');
  for (const u of [...ups.slice(1), honest]) u.slot.release();
});

t.test('the hard caps count IPv6 by /64', async (t) => {
  const [w0] = host(8, { perAddress: 2 });
  const x = held(upload(w0, '2001:db8:9:9::1', 'A'));
  const y = held(upload(w0, '2001:db8:9:9::2', 'B'));
  t.equal(upload(w0, '2001:db8:9:9:ffff::3', 'C'), 'address', 'a third address in the /64 is over the cap');
  t.not(upload(w0, '2001:db8:9:a::1', 'C'), 'address', 'the next /64 is not');
  x.slot.release();
  y.slot.release();
});

t.test('a call past its upload keeps its slot; a caller whose only candidates are processing is refused', async (t) => {
  const [w0, w1] = host();
  const a = [0, 1, 2, 3].map((i) => held(upload(i % 2 ? w1 : w0, '198.51.100.1', 'A')));
  for (const u of a) t.ok(u.slot.uploaded(), 'upload complete, slot kept');
  t.equal(upload(w1, '203.0.113.1', 'B'), 'host', 'nothing to revoke: every holder is past its upload');
  t.notOk(a.some((u) => u.revoked));
  // tryAcquire (no revocation callback) takes a slot that is never revoked
  for (const u of a.slice(1)) u.slot.release();
  a[0]!.slot.release();
  const fixed = [0, 1, 2, 3].map(() => w0.tryAcquire('198.51.100.1', 'A'));
  t.ok(fixed.every((r) => typeof r === 'function'));
  t.equal(upload(w1, '203.0.113.1', 'B'), 'host', 'a slot taken without a revocation callback is not revoked');
  for (const r of fixed) if (typeof r === 'function') r();
  t.equal(w0.inUse(), 0);
});

t.test('a revocation racing the last byte: uploaded() says false, and the slot stays the newcomer\'s', async (t) => {
  const [w0, w1] = host(2);
  const a = [held(upload(w0, '198.51.100.1', 'A')), held(upload(w0, '198.51.100.1', 'A'))];
  const b = held(upload(w1, '203.0.113.1', 'B'));
  // before w0's look at the table: the upload ends and asks to keep its slot
  t.notOk(a[0]!.slot.uploaded(), 'the oldest lost its slot');
  t.ok(a[1]!.slot.uploaded(), 'the other keeps its own');
  a[0]!.slot.release();
  t.equal(w0.inUse(), 2);
  await new Promise<void>((resolve) => setImmediate(resolve));
  t.notOk(a[0]!.revoked, 'no revocation callback for an upload that already ended');
  a[1]!.slot.release();
  b.slot.release();
  t.equal(w0.inUse(), 0);
});

// The rule against a plain model, over random interleavings of two workers: a full host
// refuses a caller exactly when no upload's caller has a load above the newcomer's load + 1;
// otherwise the oldest upload of the highest load gives way, and only it.
t.test('model check: the shared table admits, refuses and revokes as the rule says', async (t) => {
  const callers = [
    { address: '198.51.100.1', token: 'A' },
    { address: '198.51.100.2', token: 'A' },
    { address: '198.51.100.1', token: 'B' },
    { address: '2001:db8:5:5::1', token: 'C' },
    { address: '2001:db8:5:5::2', token: 'D' },
    { address: '203.0.113.7', token: 'E' },
  ];
  type Op = { kind: 'acquire'; worker: number; caller: number } | { kind: 'uploaded' | 'release'; pick: number };
  const op = fc.oneof(
    fc.record({ kind: fc.constant('acquire' as const), worker: fc.integer({ min: 0, max: 1 }), caller: fc.integer({ min: 0, max: callers.length - 1 }) }),
    fc.record({ kind: fc.constantFrom('uploaded' as const, 'release' as const), pick: fc.nat() }),
  );
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 6 }), fc.array(op, { maxLength: 60 }), (slots, ops: Op[]) => {
      const workers = host(slots);
      interface Live { caller: number; seq: number; uploading: boolean; slot: AdmissionSlot }
      const live: Live[] = [];
      let seq = 0;
      const load = (c: number) => {
        const { address, token } = callers[c]!;
        const net = addressKey(address);
        return Math.max(live.filter((l) => callers[l.caller]!.token === token).length, live.filter((l) => addressKey(callers[l.caller]!.address) === net).length);
      };
      for (const o of ops) {
        if (o.kind === 'acquire') {
          const mine = load(o.caller);
          const full = live.length === slots;
          let victim: Live | undefined;
          if (full) {
            for (const l of live) {
              if (!l.uploading || load(l.caller) <= mine + 1) continue;
              if (!victim || load(l.caller) > load(victim.caller) || (load(l.caller) === load(victim.caller) && l.seq < victim.seq)) victim = l;
            }
          }
          const r = workers[o.worker]!.acquire(callers[o.caller]!.address, callers[o.caller]!.token, () => {});
          if (full && !victim) {
            // 'host', or the cap (caps default to every slot) for a caller holding them all
            if (typeof r !== 'string' || (mine < slots && r !== 'host')) throw new Error(`expected a refusal, got ${typeof r === 'string' ? r : 'a slot'}`);
            continue;
          }
          if (typeof r === 'string') throw new Error(`expected a slot, got ${r}`);
          if (victim) {
            live.splice(live.indexOf(victim), 1);
            // the model's victim, and no other, has lost its slot
            if (victim.slot.uploaded()) throw new Error('the victim kept its slot');
            victim.slot.release();
          }
          live.push({ caller: o.caller, seq: seq++, uploading: true, slot: r });
        } else if (live.length > 0) {
          const l = live[o.pick % live.length]!;
          if (o.kind === 'uploaded') {
            if (l.uploading && !l.slot.uploaded()) throw new Error('an upload that kept its slot was told it lost it');
            l.uploading = false;
          } else {
            l.slot.release();
            live.splice(live.indexOf(l), 1);
          }
        }
        if (workers[0]!.inUse() !== live.length) throw new Error(`in use ${workers[0]!.inUse()}, model ${live.length}`);
      }
      for (const l of live) l.slot.release();
      return workers[0]!.inUse() === 0;
    }),
    { numRuns: 300 },
  );
  t.pass('300 random interleavings agree with the model');
});
