import net from 'node:net';

// DATABASE_URL as libpq reads it, including what `pg` 8 does not: several hosts
// (`postgres://a:5432,b:5432/db`, `?host=a,b&port=5432,5433`, or the keyword form
// `host=a,b port=5432 dbname=lv`) and `target_session_attrs`. Parsed here once, at start, so
// a URL that cannot work is a configuration error naming what is wrong (never a crash at the
// first connection, never the password in clear); the PostgreSQL store connects to one host of
// the list at a time (src/store/pg/hosts.ts), through a plain one-host URL built from these
// parts, which `pg` reads as it always did (SSL and the other parameters included).

export interface DatabaseHost {
  /** a name, an IP address (IPv6 without brackets) or a Unix socket folder (starts with /) */
  host: string;
  port: number;
}

export interface DatabaseTarget {
  hosts: DatabaseHost[];
  user: string | undefined;
  password: string | undefined;
  database: string | undefined;
  /** every other parameter (sslmode, application_name, connect_timeout ...), passed to `pg` as given */
  params: [string, string][];
  /** whether each connection is checked to accept writes: with several hosts always (the
   * service writes on every call, so only the primary can serve it), with one host when
   * target_session_attrs asks for it (a proxy in front that may route to a standby) */
  checkWritable: boolean;
}

/** A DATABASE_URL that cannot work: its message never holds the password. */
export class DatabaseUrlError extends Error {}

const DEFAULT_PORT = 5432;
// libpq's values; the service writes on every call, so it cannot run on a standby
const WRITABLE_ATTRS = new Set(['any', 'read-write', 'primary']);
const READ_ONLY_ATTRS = new Set(['read-only', 'standby', 'prefer-standby']);
// keyword-form names that are parts of the target rather than parameters for `pg`
const HANDLED = new Set(['host', 'hostaddr', 'port', 'dbname', 'user', 'password', 'target_session_attrs']);

export function parseDatabaseUrl(text: string): DatabaseTarget {
  const url = /^postgres(ql)?:\/\//i.test(text);
  try {
    return build(url ? fromUrl(text) : fromKeywords(text));
  } catch (err) {
    // an unencoded ? in the password ends the authority early (`lv:pa?ss@db`): the user
    // information is then read as a host and port, and a reason quoting them would print the
    // password, so with an @ after the ? the reason is not given
    const q = text.indexOf('?');
    if (err instanceof DatabaseUrlError && url && q !== -1 && text.includes('@', q)) {
      throw new DatabaseUrlError('cannot be read: a ? in the user name or password must be written %3F (the reason is not shown: it could quote the password)');
    }
    throw err;
  }
}

interface RawTarget {
  hostList: string | undefined;
  portList: string | undefined;
  user: string | undefined;
  password: string | undefined;
  database: string | undefined;
  params: [string, string][];
}

function decode(part: string, what: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    throw new DatabaseUrlError(`the ${what} has a malformed %-escape`);
  }
}

function fromUrl(text: string): RawTarget {
  const rest = text.replace(/^postgres(ql)?:\/\//i, '');
  const q = rest.indexOf('?');
  const main = q === -1 ? rest : rest.slice(0, q);
  const query = q === -1 ? '' : rest.slice(q + 1);
  // the user information runs to the last @ before the query: an unencoded password may hold @ or /
  const at = main.lastIndexOf('@');
  const userinfo = at === -1 ? undefined : main.slice(0, at);
  const hostAndPath = main.slice(at + 1);
  const slash = hostAndPath.indexOf('/');
  const authority = slash === -1 ? hostAndPath : hostAndPath.slice(0, slash);
  const path = slash === -1 ? '' : hostAndPath.slice(slash + 1);
  let user: string | undefined;
  let password: string | undefined;
  if (userinfo !== undefined) {
    const colon = userinfo.indexOf(':');
    user = decode(colon === -1 ? userinfo : userinfo.slice(0, colon), 'user name') || undefined;
    password = colon === -1 ? undefined : decode(userinfo.slice(colon + 1), 'password');
  }
  const params: [string, string][] = [];
  let hostList: string | undefined;
  let portList: string | undefined;
  for (const pair of query.split('&').filter(Boolean)) {
    const eq = pair.indexOf('=');
    const key = decode(eq === -1 ? pair : pair.slice(0, eq), 'query');
    const value = decode((eq === -1 ? '' : pair.slice(eq + 1)).replace(/\+/g, ' '), 'query');
    if (key === 'host') hostList = value;
    else if (key === 'port') portList = value;
    else if (key === 'user') user = value || user;
    else if (key === 'password') password = value;
    else if (key === 'dbname') params.push(['__dbname', value]);
    else params.push([key, value]);
  }
  const dbname = params.find(([k]) => k === '__dbname')?.[1];
  const database = dbname ?? (decode(path, 'database name') || undefined);
  // the authority's hosts, each with its own port: `a:5432,[::1]:5433,c`
  if (hostList === undefined && authority !== '') {
    const hosts: string[] = [];
    const ports: string[] = [];
    for (const item of authority.split(',')) {
      const m = /^(\[[^\]]*\]|[^:[\]]*)(?::([^:]*))?$/.exec(item);
      if (!m) throw new DatabaseUrlError(`host ${JSON.stringify(item)} is not a host name, IPv4 address or [IPv6 address], with an optional :port`);
      hosts.push(m[1]!);
      ports.push(m[2] ?? '');
    }
    hostList = hosts.join(',');
    if (portList === undefined) portList = ports.join(',');
  }
  if (hostList === undefined || hostList === '') {
    throw new DatabaseUrlError(at === -1 ? 'names no host' : 'names no host after the @');
  }
  return { hostList, portList, user, password, database, params: params.filter(([k]) => k !== '__dbname') };
}

/** libpq's keyword form: `host=a,b port=5432 dbname=lv user=lv password='it''s'` */
function fromKeywords(text: string): RawTarget {
  const values = new Map<string, string>();
  const re = /\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*('((?:[^'\\]|\\.)*)'|[^\s']*)/y;
  let pos = 0;
  const input = text.trim();
  while (pos < input.length) {
    re.lastIndex = pos;
    const m = re.exec(input);
    if (!m) throw new DatabaseUrlError('is neither a postgres:// URL nor libpq keyword=value pairs');
    values.set(m[1]!.toLowerCase(), m[3] !== undefined ? m[3].replace(/\\(.)/g, '$1') : m[2]!);
    pos = re.lastIndex;
    while (pos < input.length && /\s/.test(input[pos]!)) pos++;
  }
  if (!values.has('host') && !values.has('hostaddr')) throw new DatabaseUrlError('names no host (host=...)');
  return {
    hostList: values.get('host') ?? values.get('hostaddr'),
    portList: values.get('port'),
    user: values.get('user') || undefined,
    password: values.get('password'),
    database: values.get('dbname') || undefined,
    params: [...values].filter(([k]) => !HANDLED.has(k) || k === 'target_session_attrs'),
  };
}

function hostOf(item: string): string {
  const v6 = /^\[(.*)\]$/.exec(item);
  if (v6) {
    if (!net.isIPv6(v6[1]!)) throw new DatabaseUrlError(`host ${item} is not a valid IPv6 address`);
    return v6[1]!;
  }
  const host = decode(item, 'host');
  if (host.startsWith('/')) return host; // a Unix socket folder
  if (net.isIP(host) !== 0) return host;
  if (!/^[A-Za-z0-9_]([A-Za-z0-9_.-]{0,252})$/.test(host)) throw new DatabaseUrlError(`host ${JSON.stringify(host)} is not a host name, IP address or socket folder`);
  return host;
}

function portOf(item: string): number {
  if (item === '') return DEFAULT_PORT;
  if (!/^\d{1,5}$/.test(item) || Number(item) < 1 || Number(item) > 65535) throw new DatabaseUrlError(`port ${JSON.stringify(item)} is not a port number (1 to 65535)`);
  return Number(item);
}

function build(raw: RawTarget): DatabaseTarget {
  const hostItems = raw.hostList!.split(',').map((h) => h.trim());
  if (hostItems.some((h) => h === '')) throw new DatabaseUrlError('has an empty host in its host list');
  const portItems = (raw.portList ?? '').split(',').map((p) => p.trim());
  if (portItems.length !== 1 && portItems.length !== hostItems.length) {
    throw new DatabaseUrlError(`names ${hostItems.length} hosts but ${portItems.length} ports (give one port for all, or one per host)`);
  }
  const hosts = hostItems.map((h, i) => ({ host: hostOf(h), port: portOf(portItems.length === 1 ? portItems[0]! : portItems[i]!) }));
  let checkWritable = hosts.length > 1;
  const params: [string, string][] = [];
  for (const [key, value] of raw.params) {
    if (key !== 'target_session_attrs') {
      params.push([key, value]);
      continue;
    }
    if (READ_ONLY_ATTRS.has(value)) throw new DatabaseUrlError(`target_session_attrs=${value} cannot serve: the service writes on every call, so it needs the primary (read-write)`);
    if (!WRITABLE_ATTRS.has(value)) throw new DatabaseUrlError(`target_session_attrs=${JSON.stringify(value)} is not one of any, read-write, primary`);
    if (value !== 'any') checkWritable = true;
  }
  return { hosts, user: raw.user, password: raw.password, database: raw.database, params, checkWritable };
}

/** One host of the target as a plain one-host URL, the form `pg` reads. */
export function hostUrl(target: DatabaseTarget, h: DatabaseHost): string {
  const auth = target.user === undefined ? '' : `${encodeURIComponent(target.user)}${target.password === undefined ? '' : `:${encodeURIComponent(target.password)}`}@`;
  const query = new URLSearchParams(target.params);
  let hostPart: string;
  if (h.host.startsWith('/')) {
    // a socket folder goes in the query (pg-connection-string's form); the authority stays empty
    query.set('host', h.host);
    query.set('port', String(h.port));
    hostPart = '';
  } else {
    hostPart = `${net.isIPv6(h.host) ? `[${h.host}]` : h.host}:${h.port}`;
  }
  const q = query.toString();
  return `postgres://${auth}${hostPart}/${encodeURIComponent(target.database ?? '')}${q ? `?${q}` : ''}`;
}

/** How logs, errors and readiness name a host. */
export function hostName(h: DatabaseHost): string {
  return h.host.startsWith('/') ? `${h.host}/.s.PGSQL.${h.port}` : `${net.isIPv6(h.host) ? `[${h.host}]` : h.host}:${h.port}`;
}
