import t from 'tap';
import { clearedCookie, readSessionCookie, sessionCookie } from '../../src/auth/session-cookie.ts';
import { loadConfig } from '../../src/config/index.ts';

t.test('cookie attributes follow COOKIE_PREFIX and COOKIE_SECURE', async (t) => {
  t.equal(sessionCookie(loadConfig({}), 'abc'), 'lv_session=abc; HttpOnly; SameSite=Strict; Path=/');
  const secure = loadConfig({ COOKIE_PREFIX: 'ops', COOKIE_SECURE: '1' });
  t.equal(sessionCookie(secure, 'abc'), 'ops_session=abc; HttpOnly; SameSite=Strict; Path=/; Secure');
  t.equal(clearedCookie(secure), 'ops_session=; Max-Age=0; HttpOnly; SameSite=Strict; Path=/; Secure');
});

t.test('the session id is found among other cookies, and only under its own name', async (t) => {
  const c = loadConfig({});
  t.equal(readSessionCookie(c, 'a=1; lv_session=xyz; b=2'), 'xyz');
  t.equal(readSessionCookie(c, 'a=1, lv_session=xyz'), 'xyz', 'two Cookie headers joined');
  t.equal(readSessionCookie(c, 'xlv_session=xyz; lv_session_old=1'), undefined);
  t.equal(readSessionCookie(c, 'lv_session='), undefined);
  t.equal(readSessionCookie(c, undefined), undefined);
  t.equal(readSessionCookie(loadConfig({ COOKIE_PREFIX: 'ops' }), 'lv_session=xyz'), undefined);
});
