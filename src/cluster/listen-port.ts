import { ConfigError, type Config } from '../config/index.ts';
import { listen, LISTEN_EXCLUSIVE, type UwsModule } from '../http/index.ts';

/** LIBUS_LISTEN_EXCLUSIVE_PORT on a first bind makes a port that another program holds an
 * error; the workers then share the port with SO_REUSEPORT. PORT=0 resolves here. */
export async function probePort(uws: UwsModule, config: Config): Promise<number> {
  const probe = uws.App();
  const socket = await listen(probe, config.HOST, config.PORT, LISTEN_EXCLUSIVE);
  if (!socket) throw new ConfigError(`cannot listen on ${config.HOST}:${config.PORT}: address in use or not available`);
  const port = uws.us_socket_local_port(socket as never);
  uws.us_listen_socket_close(socket);
  return port;
}
