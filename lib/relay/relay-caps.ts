/**
 * The relay's caps as slots (`SlotCounter`): the keys a session or a waiting connection takes
 * (all sessions, its token's, its grant's key or address), which cap a full slot stands for, and
 * what the refused browser is told; and a token's verdict as a refusal.
 */
import type { SlotClaim } from '../integrations/slot-counter.js';
import type { RelayGrant, ResolvedRelayOptions } from './relay-options.js';
import type { RelayRefusal } from './relay-session.js';
import type { TokenClaims } from './relay-tokens.js';

/** The slot keys of the caps: all sessions, connections waiting for a token. */
export const SESSIONS = 'sessions';
export const PENDING = 'pending';

/** A token's verdict as a refusal: what the browser is told, and under which reason it counts. */
export function tokenRefusal(reason: 'malformed' | 'signature' | 'expired'): { refusal: RelayRefusal; message: string; code: number } {
  return reason === 'expired'
    ? { refusal: 'expired', message: 'The relay token has expired: get a new one.', code: 401 }
    : { refusal: 'unauthorized', message: 'The relay token is not valid.', code: 401 };
}

/** The slots a session takes: one of all sessions, one of its token's, one of its grant's key (or address). */
export function sessionClaims(
  o: Pick<ResolvedRelayOptions, 'maxSessions' | 'maxSessionsPerToken'>,
  token: TokenClaims | undefined,
  grant: RelayGrant | undefined,
  address: string,
): SlotClaim[] {
  const claims: SlotClaim[] = [[SESSIONS, o.maxSessions]];
  const keyed = grant?.key !== undefined;
  if (token) {
    const limit = token.maxSessions ?? o.maxSessionsPerToken;
    claims.push([`token ${token.id}`, keyed || grant?.maxSessions === undefined ? limit : Math.min(limit, grant.maxSessions)]);
  }
  if (keyed) claims.push([`key ${grant!.key}`, grant!.maxSessions ?? o.maxSessionsPerToken]);
  else if (!token && grant?.maxSessions !== undefined) claims.push([`address ${address}`, grant.maxSessions]);
  return claims;
}

/** The cap a full slot stands for. */
export function capReason(key: string): RelayRefusal {
  if (key === SESSIONS) return 'maxSessions';
  if (key === PENDING) return 'maxPendingConnections';
  return key.startsWith('token ') ? 'maxSessionsPerToken' : 'maxSessionsPerKey';
}

/** What a browser refused by a cap (429) is told. */
export function capMessage(reason: RelayRefusal, o: Pick<ResolvedRelayOptions, 'maxSessions' | 'maxPendingConnections'>): string {
  switch (reason) {
    case 'maxSessions':
      return `The relay has its most sessions at once (${o.maxSessions}); try again later.`;
    case 'maxPendingConnections':
      return `Too many connections are waiting for their token (${o.maxPendingConnections}); try again later.`;
    case 'maxSessionsPerToken':
      return 'This token holds its most sessions at once; close one first.';
    default:
      return 'This user holds its most sessions at once; close one first.';
  }
}
