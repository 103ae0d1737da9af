// errorMessage: the text of anything thrown, for one log line.
import { describe, expect, it } from 'vitest';
import { errorMessage } from '../../src/util/errorMessage.js';

describe('errorMessage', () => {
  it('an Error, a string, and an error object from another thread (a shard\'s, cloned by Piscina: not an Error here) by its message, never "[object Object]"', () => {
    expect(errorMessage(new Error('boom'))).toBe('boom');
    expect(errorMessage('plain')).toBe('plain');
    expect(errorMessage({ message: 'attempt to write a readonly database', code: 'SQLITE_READONLY' })).toBe('attempt to write a readonly database');
    expect(errorMessage({ nothing: 1 })).toBe('[object Object]');
    expect(errorMessage(null)).toBe('null');
  });
});
