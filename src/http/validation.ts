// A request's query and body against its route's schemas: the 400 that names what is wrong, and the
// query validated through the route's QueryMemo (a hit splits nothing).
import type { z } from 'zod';
import { apiError, type ApiError } from '../errors.js';
import type { QueryMemo } from './queryMemo.js';
import type { RequestInfo } from './request.js';

/** zod's words for a value left out ("Invalid input: expected number, received undefined") as what
 *  they mean to a client: `required (a number)`. */
function messageOf(i: z.core.$ZodIssue): string {
  if (i.code === 'invalid_type' && / received undefined$/.test(i.message)) return `required (${/^[aeiou]/.test(i.expected) ? 'an' : 'a'} ${i.expected})`;
  return i.message;
}

export function formatZodError(where: string, err: z.ZodError): string {
  return err.issues
    .map((issue) => {
      const i = { ...issue, message: messageOf(issue) };
      if (where === 'body') return `body field '${i.path.length ? i.path.join('.') : where}': ${i.message}`;
      // A query parameter as the client wrote it; a list's (`impact=High,Extreme`) bad item by its
      // place, not as the schema's path ('impact.1').
      const [name, item] = i.path;
      return `parameter '${name === undefined ? where : String(name)}'${typeof item === 'number' ? ` (value ${item + 1})` : ''}: ${i.message}`;
    })
    .join('; ');
}

/**
 * The 400 for a query that failed its schema: INVALID_PARAMETER when it has parameters the route
 * does not take (`strictParams`; they are listed in `parameters`), else BAD_REQUEST naming the bad values.
 */
export function queryError(err: z.ZodError): ApiError {
  const unknown = err.issues.filter((i) => i.code === 'unrecognized_keys');
  if (unknown.length > 0) {
    const parameters = unknown.flatMap((i) => (i as { keys: string[] }).keys);
    return apiError('INVALID_PARAMETER', unknown.map((i) => i.message).join('; '), { details: { parameters } });
  }
  return apiError('BAD_REQUEST', formatZodError('query', err));
}

/**
 * The route's validated query (400 on a bad one), or the split query of a route without a schema.
 * `req.query` is read only on a memo miss: the getter splits the raw string, which a hit never needs.
 */
export function validatedQuery(req: Pick<RequestInfo, 'rawQuery' | 'query'>, memo: QueryMemo | undefined): unknown {
  if (!memo) return req.query;
  // memo.parse calls back synchronously: one module-level function reads the request being
  // validated (a closure per request before).
  validating = req;
  let r;
  try {
    r = memo.parse(req.rawQuery, splitValidating);
  } finally {
    validating = undefined;
  }
  if (!r.ok) throw queryError(r.error);
  return r.data;
}
let validating: Pick<RequestInfo, 'query'> | undefined;
const splitValidating = () => validating!.query;
