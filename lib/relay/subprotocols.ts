/**
 * The subprotocols a browser offers the relay, in a module with no dependency, so the relay and
 * the browser module (which offers them) share one definition.
 */

/** The subprotocol a browser offers beside its token, and the relay answers with. */
export const RELAY_SUBPROTOCOL = 'rt-translate';
/** A subprotocol carrying a token: `rt-translate.token.<token>`. */
export const TOKEN_SUBPROTOCOL_PREFIX = 'rt-translate.token.';
