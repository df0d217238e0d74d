import { GuardedDestinationChecker } from '../adapters/http/destination-checker.ts';
import { UndiciSender } from '../adapters/http/undici-sender.ts';
import type { Config } from '../config/config.ts';
import type { Clock } from '../ports/clock.ts';
import type { DestinationChecker, HttpSender } from '../ports/http-sender.ts';
import { VERSION } from './version.ts';

/** The guarded undici client every outbound delivery request goes through (ADR-11/12). */
export function createSender(config: Config, clock: Clock): HttpSender {
  return new UndiciSender({
    allowNetworks: config.allowNetworks,
    denyNetworks: config.denyNetworks,
    httpsOnly: config.httpsOnly,
    localAddress: config.egressSourceAddress,
    userAgent: `Hookrail/${VERSION}`,
    now: () => clock.now(),
  });
}

/** The same guard at registration, for a friendly early error (the authoritative check is at connect). */
export function createDestinationChecker(config: Config): DestinationChecker {
  return new GuardedDestinationChecker({
    allowNetworks: config.allowNetworks,
    denyNetworks: config.denyNetworks,
    httpsOnly: config.httpsOnly,
  });
}
