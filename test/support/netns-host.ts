/**
 * The program test/e2e/containment.test.ts runs inside each of its network namespaces
 * (`ip netns exec <ns> node --import tsx test/support/netns-host.ts <label> [<port>,…]`). One long-lived process
 * per namespace, because starting Node with the TypeScript loader costs about a second.
 *
 * With ports, it serves HTTP on [::]:port (IPv4 too), counting every TCP connection per port; `/redirect?to=<url>`
 * answers 307 to <url>, everything else 200 with the label. It prints {"event":"ready"}, then answers one JSON
 * line per JSON command read from stdin, in order:
 *   {"op":"report"}   → {"connections":{"<port>":n}}
 *   {"op":"send","http":[url…],"tcp":["host:port"…],"hosts":{name:[address…]}}
 *                     → {"http":[{url,ms,status,body}|{url,ms,errorClass,message}],"tcp":[{target,ok,code}]}
 *     through the real UndiciSender with the guard deliberately disabled (allowNetworks 0.0.0.0/0 and ::/0), and
 *     plain TCP connects (a "database" probe). It exits when stdin closes.
 */
import { createServer as createHttpServer } from 'node:http';
import { connect, type Socket } from 'node:net';
import { createInterface } from 'node:readline';
import { UndiciSender } from '../../src/adapters/http/undici-sender.ts';

const [label = 'host', portList = ''] = process.argv.slice(2);
const print = (value: unknown) => process.stdout.write(`${JSON.stringify(value)}\n`);

async function serve(ports: number[]): Promise<Record<string, number>> {
  const connections: Record<string, number> = {};
  await Promise.all(
    ports.map(
      (port) =>
        new Promise<void>((resolve, reject) => {
          connections[port] = 0;
          const server = createHttpServer((req, res) => {
            const url = new URL(req.url ?? '/', 'http://x');
            req.resume();
            if (url.pathname === '/redirect') {
              res.writeHead(307, { location: url.searchParams.get('to') ?? '/' });
              res.end();
              return;
            }
            res.end(label);
          });
          server.on('connection', (s: Socket) => {
            connections[port] = (connections[port] ?? 0) + 1;
            s.on('error', () => {});
          });
          server.once('error', reject);
          server.listen({ port, host: '::', ipv6Only: false }, () => resolve());
        }),
    ),
  );
  return connections;
}

interface Targets {
  http?: string[];
  tcp?: string[];
  hosts?: Record<string, string[]>;
}

function tcpProbe(target: string): Promise<{ target: string; ok: boolean; code: string | null }> {
  const i = target.lastIndexOf(':');
  const host = target.slice(0, i).replace(/^\[(.*)\]$/, '$1');
  const port = Number(target.slice(i + 1));
  return new Promise((resolve) => {
    const socket = connect({ host, port, timeout: 2_000 });
    socket.once('connect', () => {
      socket.destroy();
      resolve({ target, ok: true, code: null });
    });
    socket.once('timeout', () => {
      socket.destroy();
      resolve({ target, ok: false, code: 'ETIMEDOUT' });
    });
    socket.once('error', (err: NodeJS.ErrnoException) =>
      resolve({ target, ok: false, code: err.code ?? null }),
    );
  });
}

async function send(targets: Targets): Promise<unknown> {
  const hosts = targets.hosts ?? {};
  const sender = new UndiciSender({
    // The guard is switched off on purpose: only the network's topology stands between us and the targets.
    allowNetworks: ['0.0.0.0/0', '::/0'],
    resolver: {
      async resolve(host) {
        const answer = hosts[host];
        if (!answer) throw Object.assign(new Error(`ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
        return answer;
      },
    },
    connectTimeoutMs: 2_000,
    attemptTimeoutMs: 4_000,
  });
  const http = [];
  for (const url of targets.http ?? []) {
    const started = Date.now();
    const result = await sender.send({
      url,
      body: Buffer.from('{"type":"containment.probe"}'),
      headersFor: () => ({ 'content-type': 'application/json' }),
    });
    http.push(
      result.kind === 'response'
        ? { url, ms: Date.now() - started, status: result.status, body: result.bodyPrefix.toString('utf8') }
        : { url, ms: Date.now() - started, errorClass: result.errorClass, message: result.message },
    );
  }
  await sender.close();
  const tcp = await Promise.all((targets.tcp ?? []).map(tcpProbe));
  return { http, tcp };
}

const connections = await serve(portList.split(',').filter(Boolean).map(Number));
let queue = Promise.resolve();
createInterface({ input: process.stdin }).on('line', (line) => {
  const command = JSON.parse(line) as { op: string } & Targets;
  queue = queue.then(async () => {
    print(command.op === 'report' ? { connections } : await send(command));
  });
});
process.stdin.on('end', () => queue.then(() => process.exit(0)));
print({ event: 'ready' });
