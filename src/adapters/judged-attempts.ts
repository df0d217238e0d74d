/**
 * The SQL twin of judgesEndpoint (domain/outcome.ts) for reads of the attempt log: an attempt counts as sent to the
 * endpoint — in its success rate, latencies and time series — unless Hookrail chose not to send it (`circuit_open`)
 * or could not (`platform_error`). Built from the domain's list, so a class added there is excluded everywhere; the
 * classes are fixed identifiers, inlined as literals (the statement stays one plan per shape).
 */
import { NOT_THE_ENDPOINTS } from '../domain/outcome.ts';

export const JUDGES_ENDPOINT_SQL = `(error_class IS NULL OR error_class NOT IN (${NOT_THE_ENDPOINTS.map((c) => `'${c}'`).join(', ')}))`;
