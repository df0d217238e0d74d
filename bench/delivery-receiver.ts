/**
 * The webhook receiver for bench/delivery.ts, in a process of its own: a bare node:http server that answers 204 to
 * any POST on any path (keep-alive) and records, per request, its arrival time on the machine's monotonic clock
 * (support.ts machineMs — comparable with the producer's 202 times in another process) keyed by the event id read
 * from the body, plus the distinct `webhook-id`s (lost and duplicated deliveries).
 *
 *   node --import tsx bench/delivery-receiver.ts [--hold-prefix /slow/ --hold-ms 15000]
 *     → prints "listening on http://127.0.0.1:<port> control http://127.0.0.1:<port>"; SIGTERM stops it.
 *
 * With --hold-prefix, requests whose path starts with it are recorded on arrival like any other but answered only
 * after --hold-ms: a slow endpoint that accepts the connection and never errors (bench/isolation.ts). Their
 * webhook-ids are also counted apart (`heldWebhookIds`), so a caller can wait for the other paths' deliveries alone.
 *
 * Control port (never touched by the load): GET /stats, GET /arrivals (first arrival per event id, as
 * [[id, ms], …]), POST /reset.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import { machineMs } from './support.ts';

const { values: args } = parseArgs({
  options: { 'hold-prefix': { type: 'string' }, 'hold-ms': { type: 'string', default: '15000' } },
});
const holdPrefix = args['hold-prefix'] ?? null;
const holdMs = Number(args['hold-ms']);

export interface ReceiverStats {
  /** Requests answered. */
  requests: number;
  /** Distinct webhook-id headers seen. */
  distinctWebhookIds: number;
  /** Requests whose webhook-id had been seen before (retries or at-least-once repeats). */
  duplicates: number;
  /** Requests without a webhook-id or without a readable event id. */
  malformed: number;
  distinctEvents: number;
  distinctPaths: number;
  firstAt: number | null;
  lastAt: number | null;
  /** Requests on --hold-prefix paths. */
  held: number;
  /** Distinct webhook-ids seen on --hold-prefix paths (included in distinctWebhookIds). */
  heldWebhookIds: number;
}

let webhookIds = new Set<string>();
let arrivals = new Map<string, number>();
let paths = new Set<string>();
let requests = 0;
let duplicates = 0;
let malformed = 0;
let firstAt: number | null = null;
let lastAt: number | null = null;
let heldIds = new Set<string>();
let held = 0;

/** The event id without parsing JSON: Hookrail's body starts `{"id":"evt_…",` (src/domain/delivery-request.ts). */
function eventIdOf(body: string): string | null {
  if (!body.startsWith('{"id":"')) return null;
  const end = body.indexOf('"', 7);
  return end > 7 ? body.slice(7, end) : null;
}

function onHook(req: IncomingMessage, res: ServerResponse): void {
  const at = machineMs();
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    requests++;
    firstAt ??= at;
    lastAt = at;
    const webhookId = req.headers['webhook-id'];
    const eventId = eventIdOf(Buffer.concat(chunks).toString('utf8'));
    const hold = holdPrefix !== null && (req.url ?? '').startsWith(holdPrefix);
    if (typeof webhookId !== 'string' || eventId === null) malformed++;
    else {
      if (webhookIds.has(webhookId)) duplicates++;
      else webhookIds.add(webhookId);
      if (hold) heldIds.add(webhookId);
      if (!arrivals.has(eventId)) arrivals.set(eventId, at);
    }
    paths.add(req.url ?? '');
    if (!hold) {
      res.writeHead(204);
      res.end();
      return;
    }
    held++;
    // Answered even if the client gave up meanwhile: writing to a closed socket is a no-op.
    setTimeout(() => {
      res.writeHead(204);
      res.end();
    }, holdMs);
  });
}

function stats(): ReceiverStats {
  return {
    requests,
    distinctWebhookIds: webhookIds.size,
    duplicates,
    malformed,
    distinctEvents: arrivals.size,
    distinctPaths: paths.size,
    firstAt,
    lastAt,
    held,
    heldWebhookIds: heldIds.size,
  };
}

function onControl(req: IncomingMessage, res: ServerResponse): void {
  const send = (body: unknown) => {
    const text = JSON.stringify(body);
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  };
  req.resume();
  if (req.method === 'GET' && req.url === '/stats') send(stats());
  else if (req.method === 'GET' && req.url === '/arrivals') send([...arrivals]);
  else if (req.method === 'POST' && req.url === '/reset') {
    webhookIds = new Set();
    arrivals = new Map();
    paths = new Set();
    heldIds = new Set();
    requests = duplicates = malformed = held = 0;
    firstAt = lastAt = null;
    send(stats());
  } else {
    res.writeHead(404);
    res.end();
  }
}

const hook = createServer({ keepAlive: true, requestTimeout: 0 }, onHook);
// Longer than any client's idle timeout, so the server never closes a socket the client is about to reuse.
hook.keepAliveTimeout = 60_000;
hook.headersTimeout = 61_000;
const control = createServer(onControl);
const listen = (s: ReturnType<typeof createServer>) =>
  new Promise<number>((resolve) =>
    s.listen(0, '127.0.0.1', () => resolve((s.address() as AddressInfo).port)),
  );
const hookPort = await listen(hook);
const controlPort = await listen(control);
process.stdout.write(`listening on http://127.0.0.1:${hookPort} control http://127.0.0.1:${controlPort}\n`);
process.once('SIGTERM', () => {
  hook.closeAllConnections();
  control.closeAllConnections();
  process.exit(0);
});
