/**
 * Names and statuses of the shared-memory engine-state feed (docs/shm-layout.md), shared by the
 * router (which reads the feed inside the addon) and src/state (its writers and tools).
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';

import { invalidValue } from './errors.js';

/** `/dev/shm/NAME` for a bare name (/tmp where /dev/shm is absent); a path as is. */
export function feedPath(name: string): string {
  if (typeof name !== 'string' || name === '') throw invalidValue('shm', 'a feed name or a path', name);
  if (name.includes('/')) return name;
  return join(existsSync('/dev/shm') ? '/dev/shm' : '/tmp', name);
}

export type FeedStatus = 'ok' | 'missing' | 'bad-magic' | 'bad-version' | 'bad-size';

/** Status codes of the addon's reader (shm::FeedStatus), in order. */
export const FEED_STATUSES: readonly FeedStatus[] = ['ok', 'missing', 'bad-magic', 'bad-version', 'bad-size'];

/** Why a feed is not readable, completing "the feed PATH …". */
export const FEED_STATUS_REASONS: Readonly<Record<Exclude<FeedStatus, 'ok'>, string>> = {
  missing: 'does not exist or cannot be opened',
  'bad-magic': 'is not a kvroute engine-state file (wrong magic)',
  'bad-version': 'has another layout version than 1',
  'bad-size': 'has a slot size, slot count and file size that disagree',
};

/** The warning a router or reader gives when a feed becomes unreadable. */
export function feedWarning(path: string, status: Exclude<FeedStatus, 'ok'>): string {
  return `kvroute: engine-state feed ${path} ${FEED_STATUS_REASONS[status]}; using shadow state`;
}
