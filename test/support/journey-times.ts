/** Times for tests of the endpoint-outage journey (../shared/seeds): its clock starts at 02:00. */
export const S = 1000;
export const MIN = 60 * S;
/** The journey's 02:00. */
export const T0 = Date.UTC(2026, 0, 1, 2, 0, 0);
