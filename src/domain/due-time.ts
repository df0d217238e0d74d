/**
 * An endpoint's due time is the earliest due time of its unleased pending deliveries (the stores keep it on the
 * endpoint's queue row, where the lease finds due endpoints). So only a change to that set moves it.
 */

/**
 * Whether a completion that changed its delivery changes the endpoint's unleased pending set: a delivery goes
 * back to the queue (a retry), or a skip (never leased) is rescheduled or dead-lettered. A leased delivery that
 * ends delivered or dead was not in the set, so its completion leaves the due time as it was.
 */
export function completionMovesDueTime(
  nextStatus: 'pending' | 'delivered' | 'dead',
  wasLeased: boolean,
): boolean {
  return nextStatus === 'pending' || !wasLeased;
}
