/**
 * The answer deadline of the transactions that rewrite a whole backlog in one statement — re-enabling an endpoint,
 * deleting it, unsubscribing it from event types, deleting a tenant, and the lane rebalance pass (its backlog counts
 * over every candidate endpoint); they ask for it with the tx option BULK_DEADLINE_TX (endpoints-store.ts). Their time
 * grows with the backlog: 300,000 pending deliveries took 4.5–6 s, so under the short deadline they failed every
 * time on exactly the endpoints and tenants that need them most. Two minutes covers millions of rows. The price: a
 * partition or a dead server during one of them is noticed only when this runs out (the connection is then
 * discarded as for any other statement). Every other statement keeps the short deadline.
 */
export const BULK_DEADLINE_MS = 120_000;
