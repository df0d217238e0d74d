import { describe, expect, it } from 'vitest';
import { isValidEventTypeFilter, matchesEventType } from './event-types.ts';

describe('matchesEventType', () => {
  it.each([
    [['*'], 'anything.at.all', true],
    [['order.created'], 'order.created', true],
    [['order.created'], 'order.updated', false],
    [['order.*'], 'order.created', true],
    [['order.*'], 'order.line.added', true],
    [['order.*'], 'order', false],
    [['order.*'], 'orders.created', false],
    [['invoice.paid', 'order.*'], 'order.x', true],
    [[], 'order.created', false],
  ] as const)('%j matches %s → %s', (filters, type, expected) => {
    expect(matchesEventType(filters, type)).toBe(expected);
  });
});

describe('isValidEventTypeFilter', () => {
  it.each([
    ['*', true],
    ['order.*', true],
    ['order.created', true],
    ['order.**', false],
    ['*.created', false],
    ['order..x', false],
    ['', false],
    ['or der', false],
  ])('%s → %s', (filter, expected) => {
    expect(isValidEventTypeFilter(filter)).toBe(expected);
  });
});
