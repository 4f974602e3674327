/**
 * The pure parts of resuming (RFC 9110): the validators sent, the answers accepted or refused,
 * the 416 that completes a file.
 */
import { describe, expect, it } from 'vitest';
import { IntegrityError, ProtocolError } from '../lib/errors.js';
import { UNKNOWN_FILE, acceptAnswer, completeAt416, ifRange, resumeHeaders, strongDate, type FileIdentity } from '../lib/http/download-resume.js';

const WHERE = 'https://files.example/f.flac';
const MODIFIED = 'Tue, 03 Nov 2026 10:00:00 GMT';
const file = (fields: Partial<FileIdentity>): FileIdentity => ({ ...UNKNOWN_FILE, ...fields });

describe('strongDate', () => {
  it.each([
    ['Date a second later', MODIFIED, 'Tue, 03 Nov 2026 10:00:01 GMT', true],
    ['Date an hour later', MODIFIED, 'Tue, 03 Nov 2026 11:00:00 GMT', true],
    ['Date the same second', MODIFIED, MODIFIED, false],
    ['Date earlier', MODIFIED, 'Tue, 03 Nov 2026 09:00:00 GMT', false],
    ['no Date', MODIFIED, undefined, false],
    ['no Last-Modified', undefined, MODIFIED, false],
    ['an unreadable date', 'yesterday', MODIFIED, false],
  ] as const)('%s: %s', (_name, lastModified, date, strong) => {
    expect(strongDate(lastModified, date)).toBe(strong);
  });
});

describe('ifRange and resumeHeaders', () => {
  it.each([
    ['a strong ETag', file({ etag: '"v1"', lastModified: MODIFIED, lastModifiedStrong: true }), '"v1"'],
    ['a weak ETag (never sent, nor the date)', file({ etag: 'W/"v1"', lastModified: MODIFIED, lastModifiedStrong: true }), undefined],
    ['no ETag, a strong date', file({ lastModified: MODIFIED, lastModifiedStrong: true }), MODIFIED],
    ['no ETag, a weak date', file({ lastModified: MODIFIED }), undefined],
    ['nothing known', UNKNOWN_FILE, undefined],
  ] as const)('%s', (_name, known, validator) => {
    expect(ifRange(known)).toBe(validator);
    const expected: Record<string, string> = { range: 'bytes=5000-' };
    if (validator !== undefined) expected['if-range'] = validator;
    expect(resumeHeaders(5000, known)).toEqual(expected);
    expect(resumeHeaders(0, known)).toEqual({});
  });
});

describe('acceptAnswer', () => {
  it.each([
    ['a 200 from byte 0', 200, { 'content-length': '9000' }, 0, 0, 9000],
    ['a 206 from the byte asked for', 206, { 'content-range': 'bytes 5000-8999/9000' }, 5000, 0, 9000],
    ['a 206 that starts earlier (block-aligned)', 206, { 'content-range': 'bytes 4096-8999/9000' }, 5000, 904, 9000],
    ['a 206 of unknown size', 206, { 'content-range': 'bytes 5000-8999/*' }, 5000, 0, undefined],
    ['a 200 in answer to a range: read again, skipped', 200, { 'content-length': '9000' }, 5000, 5000, 9000],
    ['a 200 without a length', 200, {}, 0, 0, undefined],
  ] as const)('%s', (_name, status, headers, received, skip, total) => {
    const accepted = acceptAnswer(status, headers, received, UNKNOWN_FILE, WHERE);
    expect(accepted.skip).toBe(skip);
    expect(accepted.file.total).toBe(total);
  });

  it('keeps the validators of the first answer that named any, and whether its date is strong', () => {
    const first = acceptAnswer(
      200,
      { etag: '"v1"', 'last-modified': MODIFIED, date: 'Tue, 03 Nov 2026 10:00:07 GMT', 'content-length': '9000' },
      0,
      UNKNOWN_FILE,
      WHERE,
    );
    expect(first.file).toEqual({ etag: '"v1"', lastModified: MODIFIED, lastModifiedStrong: true, total: 9000 });
    const later = acceptAnswer(
      206,
      { etag: '"v1"', 'last-modified': 'Tue, 03 Nov 2026 12:00:00 GMT', 'content-range': 'bytes 5000-8999/9000' },
      5000,
      first.file,
      WHERE,
    );
    expect(later.file).toEqual(first.file);
  });

  it.each([
    ['another ETag', { etag: '"v2"' }, file({ etag: '"v1"' })],
    ['another size', { 'content-length': '9001' }, file({ total: 9000 })],
    ['another Last-Modified, neither with an ETag', { 'last-modified': 'Tue, 03 Nov 2026 10:05:00 GMT' }, file({ lastModified: MODIFIED })],
  ] as const)('refuses a resumed 200 with %s: IntegrityError', (_name, headers, known) => {
    const attempt = (): unknown => acceptAnswer(200, headers, 5000, known, WHERE);
    expect(attempt).toThrow(IntegrityError);
    expect(attempt).toThrow(`The file at ${WHERE} changed while it was being downloaded (at byte 5000); start the download again.`);
  });

  it.each([
    [
      'the same ETag, another Last-Modified',
      { etag: '"v1"', 'last-modified': 'Tue, 03 Nov 2026 10:05:00 GMT' },
      file({ etag: '"v1"', lastModified: MODIFIED }),
    ],
    ['validators the first answer did not name', { etag: '"v1"' }, file({ total: 9000 })],
  ] as const)('accepts a resumed 200 with %s', (_name, headers, known) => {
    expect(acceptAnswer(200, headers, 5000, known, WHERE).skip).toBe(5000);
  });

  it('takes nothing for the file before the first byte: a first answer never differs', () => {
    expect(acceptAnswer(200, { etag: '"v2"', 'content-length': '10' }, 0, file({ etag: '"v1"', total: 9 }), WHERE).skip).toBe(0);
  });

  it.each([
    ['no Content-Range', {}, `The server answered a request for ${WHERE} from byte 5000 with 206 but no valid Content-Range.`],
    [
      'a Content-Range of another unit',
      { 'content-range': 'items 0-1/2' },
      `The server answered a request for ${WHERE} from byte 5000 with 206 but no valid Content-Range.`,
    ],
    [
      'a range that starts later',
      { 'content-range': 'bytes 6000-8999/9000' },
      `The server answered a request for ${WHERE} from byte 5000 with a range that starts later, at byte 6000: 1000 bytes would be missing.`,
    ],
  ] as const)('refuses a 206 with %s: ProtocolError', (_name, headers, message) => {
    const attempt = (): unknown => acceptAnswer(206, headers, 5000, UNKNOWN_FILE, WHERE);
    expect(attempt).toThrow(ProtocolError);
    expect(attempt).toThrow(message);
  });
});

describe('completeAt416', () => {
  it.each([
    ['names the bytes received', { 'content-range': 'bytes */9000' }, 9000, UNKNOWN_FILE, 9000],
    ['names nothing, the size known before matches', {}, 9000, file({ total: 9000 }), 9000],
    ['names more than received', { 'content-range': 'bytes */9000' }, 5000, UNKNOWN_FILE, undefined],
    ['names nothing and no size is known', {}, 5000, UNKNOWN_FILE, undefined],
    ['from byte 0', { 'content-range': 'bytes */0' }, 0, UNKNOWN_FILE, undefined],
  ] as const)('a 416 that %s', (_name, headers, received, known, total) => {
    expect(completeAt416(headers, received, known, WHERE)).toBe(total);
  });

  it('a 416 naming another size than the one known means the file changed', () => {
    const attempt = (): unknown => completeAt416({ 'content-range': 'bytes */9100' }, 9000, file({ total: 9000 }), WHERE);
    expect(attempt).toThrow(IntegrityError);
    expect(attempt).toThrow('its size went from 9000 to 9100 bytes');
  });
});
