import net from 'node:net';

/**
 * A TCP proxy in front of PostgreSQL, to break connections the ways networks do: `blackHole()` stops
 * forwarding on every open connection without closing it (a NAT or load balancer that dropped the flow;
 * new connections still work), `refuse()` cuts every connection and refuses new ones (the server is gone).
 */
export class TcpProxy {
  private server: net.Server;
  private readonly pairs = new Set<{ client: net.Socket; upstream: net.Socket }>();
  /** Black-holed connections, kept only to be destroyed by close(). */
  private readonly holes: net.Socket[] = [];
  /** The port it listens on (kept for reopen()). */
  private port = 0;
  /** Connections accepted so far. */
  accepted = 0;
  /** holdReplies(): the server's bytes no longer reach the clients. */
  private holding = false;

  private constructor(
    private readonly target: { host: string; port: number },
    /**
     * A slow return path for some connections: once a client has sent `marker` (a table name its statements use,
     * say), the server's answers on that connection reach it `delayMs` later, in order.
     */
    private readonly slow?: { marker: string; delayMs: number },
  ) {
    this.server = net.createServer((client) => this.accept(client));
  }

  /** Starts a proxy to the database of `url`; `proxy.url` is the same URL through the proxy. */
  static async start(url: string, options: { slowAfter?: { marker: string; delayMs: number } } = {}): Promise<TcpProxy & { url: string }> {
    const u = new URL(url);
    const proxy = new TcpProxy({ host: u.hostname, port: Number(u.port || 5432) }, options.slowAfter);
    await new Promise<void>((resolve) => proxy.server.listen(0, '127.0.0.1', resolve));
    u.hostname = '127.0.0.1';
    proxy.port = (proxy.server.address() as net.AddressInfo).port;
    u.port = String(proxy.port);
    return Object.assign(proxy, { url: u.toString() });
  }

  private accept(client: net.Socket): void {
    this.accepted += 1;
    const upstream = net.connect(this.target.port, this.target.host);
    const pair = { client, upstream };
    this.pairs.add(pair);
    client.pipe(upstream);
    const slow = this.slow;
    if (slow) {
      let delayMs = 0;
      client.on('data', (chunk: Buffer) => void (chunk.includes(slow.marker) && (delayMs = slow.delayMs)));
      upstream.on('data', (chunk: Buffer) => {
        if (delayMs === 0) client.write(chunk);
        else setTimeout(() => client.destroyed || client.write(chunk), delayMs);
      });
    } else if (!this.holding) {
      upstream.pipe(client);
    }
    const drop = () => {
      this.pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
  }

  /** Open connections stop carrying bytes either way, and nobody is told. */
  blackHole(): void {
    for (const { client, upstream } of this.pairs) {
      client.unpipe(upstream);
      upstream.unpipe(client);
      client.pause();
      upstream.pause();
      client.removeAllListeners('close');
      upstream.removeAllListeners('close');
      this.holes.push(client, upstream);
    }
    this.pairs.clear();
  }

  /**
   * From now on the server's answers are lost on the way back, on open connections and new ones, while what the
   * clients send still reaches it: a statement commits and its client never hears so (a read timeout, a network
   * that dropped the return path).
   */
  holdReplies(): void {
    this.holding = true;
    for (const { client, upstream } of this.pairs) {
      upstream.unpipe(client);
      upstream.pause();
    }
  }

  /** Every connection is cut and new ones are refused, as when the server is down. */
  async refuse(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const { client, upstream } of this.pairs) {
      client.destroy();
      upstream.destroy();
    }
    this.pairs.clear();
    await closed;
  }

  /**
   * Every open connection is destroyed (black-holed ones too) while new ones are still accepted: the connections
   * of one host reset by a network that came back, or a firewall that dropped their state.
   */
  cut(): number {
    const n = this.pairs.size + this.holes.length / 2;
    for (const { client, upstream } of this.pairs) {
      client.destroy();
      upstream.destroy();
    }
    this.pairs.clear();
    for (const socket of this.holes.splice(0)) socket.destroy();
    return n;
  }

  /** After refuse(): accepts connections again, on the same port (the outage is over). */
  async reopen(): Promise<void> {
    const port = (this.server.address() as net.AddressInfo | null)?.port ?? this.port;
    this.server = net.createServer((client) => this.accept(client));
    await new Promise<void>((resolve) => this.server.listen(port, '127.0.0.1', resolve));
  }

  async close(): Promise<void> {
    for (const socket of this.holes.splice(0)) socket.destroy();
    if (this.server.listening) await this.refuse();
  }
}
