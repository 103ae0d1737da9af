// A key's value (tagw_<k|m>_<16 hex id>_<secret>, src/auth/keys.ts) is recognisable by its shape,
// which is what its prefix is for. A client may paste one where it does not belong: into a path
// (DELETE /v1/keys/<the key> instead of its id), a parameter, a socket message. The request log
// writes paths, and error messages name what they could not take (`no route for GET /...`,
// `no quote for symbol ...`): wherever such text is logged or shown back, the key keeps its id
// (which key it was) and loses its secret.
//
// A management key the operator chose (GATEWAY_MANAGEMENT_KEY) has no such shape: the gateway
// names it here at start (redactAlso), and it is redacted the same way, whole, for the rest of the
// process (every gateway of a process, tests included: a value never shown is no loss).

const KEY_IN_TEXT = /(tagw_[mk]_[0-9a-f]{16}_)[A-Za-z0-9_-]+/g;
const literals = new Set<string>();

/** `text` with the secret of every key value in it, and every value given to redactAlso, shown as `[redacted]`. */
export function redactKeys(text: string): string {
  let out = text.includes('tagw_') ? text.replace(KEY_IN_TEXT, '$1[redacted]') : text;
  for (const s of literals) if (out.includes(s)) out = out.replaceAll(s, '[redacted]');
  return out;
}

/** A secret of no recognisable shape, redacted by redactKeys from now on in this process. */
export function redactAlso(secret: string): void {
  literals.add(secret);
}
