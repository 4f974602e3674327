/**
 * `readJobFile` and `jobFileFormat` (lib/batch/job-file.ts): jobs files written to a temporary
 * folder and read back as records and line problems, in JSON Lines and CSV, with the line where
 * each record starts. The same bytes fed as a stream one byte at a time give the same answer; a
 * 100,000-line file is read as it arrives, with the writer held back while nobody reads.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { once } from 'node:events';
import { DEFAULT_MAX_LINE_BYTES, jobFileFormat, readJobFile, type JobLineProblem, type JobRecord, type ReadJobFileOptions } from '../lib/batch/job-file.js';
import { AbortError, JobFileError, ValidationError } from '../lib/errors.js';

type Item = JobRecord | JobLineProblem;

let dir: string;
let files = 0;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'rt-translate-jobs-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function file(name: string, content: string | Buffer): Promise<string> {
  const path = join(dir, `${++files}-${name}`);
  await writeFile(path, content);
  return path;
}

async function collect(input: string | NodeJS.ReadableStream, options?: ReadJobFileOptions): Promise<Item[]> {
  const items: Item[] = [];
  for await (const item of readJobFile(input, options)) items.push(item);
  return items;
}

/** A stream that delivers `content` one byte a chunk, as a slow standard input might. */
function byteByByte(content: string | Buffer): PassThrough {
  const bytes = Buffer.from(content);
  const stream = new PassThrough();
  void (async () => {
    for (let i = 0; i < bytes.length; i++) {
      if (!stream.write(bytes.subarray(i, i + 1))) await once(stream, 'drain');
    }
    stream.end();
  })();
  return stream;
}

/** Reads `content` from a file named `name` and byte by byte from a stream; both must agree. */
async function readBothWays(name: string, content: string | Buffer, options?: ReadJobFileOptions): Promise<Item[]> {
  const fromFile = await collect(await file(name, content), options);
  const format = options?.format ?? jobFileFormat(name, Buffer.from(content));
  expect(await collect(byteByByte(content), { ...options, format })).toEqual(fromFile);
  return fromFile;
}

describe('JSON Lines', () => {
  it('one record per object line, with its line number: blank lines skipped, CRLF and a BOM accepted, no final newline needed', async () => {
    const content =
      '\ufeff{"id":"a","kind":"tts","text":"Hello"}\r\n\r\n   \n{"id":"b","kind":"translation","texts":["x"],"targetLanguage":"es-es"}\n\t\n{"id":"c","kind":"dubbing","n":3}';
    expect(await readBothWays('jobs.jsonl', content)).toEqual([
      { line: 1, fields: { id: 'a', kind: 'tts', text: 'Hello' } },
      { line: 4, fields: { id: 'b', kind: 'translation', texts: ['x'], targetLanguage: 'es-es' } },
      { line: 6, fields: { id: 'c', kind: 'dubbing', n: 3 } },
    ]);
  });

  it('a line that is not JSON, or JSON but not an object, is a problem naming what it holds; reading goes on', async () => {
    const lines = ['{"id":"1"}', '{"id": "2",', '[1, 2]', '"just text"', 'null', '42', 'true', '{"id":"8"}'];
    const items = await readBothWays('jobs.ndjson', `${lines.join('\n')}\n`);
    expect(items.map((item) => item.line)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    expect(items[0]).toEqual({ line: 1, fields: { id: '1' } });
    expect(items[7]).toEqual({ line: 8, fields: { id: '8' } });
    const messages = items.slice(1, 7).map((item) => (item as JobLineProblem).message);
    expect(messages[0]).toMatch(/^not JSON: /);
    expect(messages.slice(1)).toEqual(
      ['an array', '"just text"', 'null', '42', 'true'].map((got) => `expected a JSON object ({"id": ..., "kind": ...}), got ${got}`),
    );
  });

  it('a line longer than maxLineBytes is one problem, and the next line is read', async () => {
    const long = `{"id":"long","text":"${'x'.repeat(300_000)}"}`;
    const content = `{"id":"1"}\n${long}\r\n{"id":"3"}\n${long}`;
    const items = await collect(await file('long.jsonl', content), { maxLineBytes: 1000 });
    expect(items).toEqual([
      { line: 1, fields: { id: '1' } },
      { line: 2, message: 'longer than 1000 bytes: not read (raise maxLineBytes, or shorten the job)' },
      { line: 3, fields: { id: '3' } },
      { line: 4, message: 'longer than 1000 bytes: not read (raise maxLineBytes, or shorten the job)' },
    ]);
  });

  it.each([
    { name: 'exactly maxLineBytes', line: `{"t":"${'x'.repeat(14)}"}`, ending: '\n', read: true },
    { name: 'exactly maxLineBytes, then CRLF', line: `{"t":"${'x'.repeat(14)}"}`, ending: '\r\n', read: true },
    { name: 'one byte more', line: `{"t":"${'x'.repeat(15)}"}`, ending: '\n', read: false },
    { name: 'one byte more, at the end of the file', line: `{"t":"${'x'.repeat(15)}"}`, ending: '', read: false },
  ])('the limit counts the line without its line break: $name', async ({ line, ending, read }) => {
    expect(Buffer.byteLength(line)).toBe(read ? 22 : 23);
    const [item] = await readBothWays('edge.jsonl', `${line}${ending}`, { maxLineBytes: 22 });
    expect('fields' in item!).toBe(read);
  });

  it('multi-byte characters cut between chunks are read whole', async () => {
    const content = '{"id":"1","text":"Grüße, 東京, 🎧"}\n';
    expect(await readBothWays('utf8.jsonl', content)).toEqual([{ line: 1, fields: { id: '1', text: 'Grüße, 東京, 🎧' } }]);
  });
});

describe('CSV', () => {
  it('a header row names the fields: names trimmed, values kept as strings, empty cells absent', async () => {
    const content = ' id , kind ,text,speed\n1,tts,Hello,1.5\n2,tts,,\n3,tts, spaced ,0\n';
    expect(await readBothWays('jobs.csv', content)).toEqual([
      { line: 2, fields: { id: '1', kind: 'tts', text: 'Hello', speed: '1.5' } },
      { line: 3, fields: { id: '2', kind: 'tts' } },
      { line: 4, fields: { id: '3', kind: 'tts', text: ' spaced ', speed: '0' } },
    ]);
  });

  it('quoted cells hold commas, quotes and line breaks; a record is numbered by the line it starts on', async () => {
    const content =
      'id,kind,text\r\n1,tts,"Hello, world"\r\n2,tts,"first line\r\nsecond line\r\nthird"\r\n3,tts,"say ""hi"""\r\n4,tts,"one\nbreak"\r\n5,tts,last';
    expect(await readBothWays('quoted.csv', content)).toEqual([
      { line: 2, fields: { id: '1', kind: 'tts', text: 'Hello, world' } },
      { line: 3, fields: { id: '2', kind: 'tts', text: 'first line\r\nsecond line\r\nthird' } },
      { line: 6, fields: { id: '3', kind: 'tts', text: 'say "hi"' } },
      { line: 7, fields: { id: '4', kind: 'tts', text: 'one\nbreak' } },
      { line: 9, fields: { id: '5', kind: 'tts', text: 'last' } },
    ]);
  });

  it('a row with the wrong number of cells is a problem at its line; the rows around it are read', async () => {
    const content = 'id,kind,text\n1,tts,a\n2,tts\n\n3,tts,"b\nc",extra\n,,\n4,tts,d\n';
    expect(await readBothWays('counts.csv', content)).toEqual([
      { line: 2, fields: { id: '1', kind: 'tts', text: 'a' } },
      { line: 3, message: '2 cells where the header has 3 columns' },
      { line: 5, message: '4 cells where the header has 3 columns' },
      { line: 8, fields: { id: '4', kind: 'tts', text: 'd' } },
    ]);
  });

  it('a BOM before the header is not part of the first column name', async () => {
    const content = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('id,kind\n7,tts\n')]);
    expect(await readBothWays('bom.csv', content)).toEqual([{ line: 2, fields: { id: '7', kind: 'tts' } }]);
  });

  it.each([
    { name: 'a duplicate column name', header: 'id,kind, id', message: 'column name "id" appears twice in the header row (columns 1 and 3)' },
    { name: 'an empty column name', header: 'id,,kind', message: 'column 2 of the header row has no name: name every column (id,kind,...)' },
  ])('$name: one problem at line 1, nothing else read', async ({ header, message }) => {
    expect(await readBothWays('header.csv', `${header}\n1,tts,x\n2,tts,y\n`)).toEqual([{ line: 1, message }]);
  });

  it('an empty file has no header row: one problem', async () => {
    expect(await collect(await file('empty.csv', ''))).toEqual([
      { line: 1, message: 'no header row: a CSV jobs file starts with the names of its columns (id,kind,...)' },
    ]);
  });

  it('a quoted cell never closed: one problem where its record starts', async () => {
    const items = await readBothWays('open.csv', 'id,kind,text\n1,tts,a\n2,tts,"never closed\n3,tts,b\n');
    expect(items).toEqual([
      { line: 2, fields: { id: '1', kind: 'tts', text: 'a' } },
      { line: 3, message: 'a quoted cell that starts in this record is never closed: the file ends inside it' },
    ]);
  });

  it('a record longer than maxLineBytes: a problem where it starts, and reading stops', async () => {
    const items = await collect(await file('long.csv', `id,kind,text\n1,tts,a\n2,tts,${'x'.repeat(5000)}\n3,tts,b\n`), { maxLineBytes: 100 });
    expect(items).toEqual([
      { line: 2, fields: { id: '1', kind: 'tts', text: 'a' } },
      { line: 3, message: 'longer than 100 bytes: not read (raise maxLineBytes, or shorten the job); the rest of the file is not read' },
    ]);
  });
});

describe('the format', () => {
  it.each([
    { path: 'jobs.jsonl', bytes: 'id,kind', expected: 'jsonl' },
    { path: 'JOBS.NDJSON', bytes: undefined, expected: 'jsonl' },
    { path: 'jobs.json', bytes: undefined, expected: 'jsonl' },
    { path: 'jobs.csv', bytes: '{"id":1}', expected: 'csv' },
    { path: 'jobs.txt', bytes: '\ufeff \r\n\t{"id":1}', expected: 'jsonl' },
    { path: '', bytes: '{', expected: 'jsonl' },
    { path: 'jobs.txt', bytes: 'id,kind', expected: 'csv' },
    { path: 'jobs', bytes: '\n\n[1]', expected: 'csv' },
    { path: 'jobs', bytes: '  ', expected: 'csv' },
    { path: 'jobs', bytes: undefined, expected: 'csv' },
  ])('$path with $bytes: $expected', ({ path, bytes, expected }) => {
    expect(jobFileFormat(path, bytes === undefined ? undefined : Buffer.from(bytes))).toBe(expected);
  });

  it('a path without a known extension, or a stream, is read in the format its first non-blank byte says', async () => {
    const jsonl = '\n\n  {"id":"1","kind":"tts"}\n';
    const csv = '\n\nid,kind\n1,tts\n';
    expect(await collect(await file('jobs.txt', jsonl))).toEqual([{ line: 3, fields: { id: '1', kind: 'tts' } }]);
    expect(await collect(await file('jobs.txt', csv))).toEqual([{ line: 4, fields: { id: '1', kind: 'tts' } }]);
    expect(await collect(byteByByte(`\ufeff${jsonl}`))).toEqual([{ line: 3, fields: { id: '1', kind: 'tts' } }]);
    expect(await collect(byteByByte(csv))).toEqual([{ line: 4, fields: { id: '1', kind: 'tts' } }]);
  });

  it('the format option wins over the extension', async () => {
    const path = await file('jobs.csv', '{"id":"1"}\n');
    // As CSV, the line is a header of one column and no row follows.
    expect(await collect(path)).toEqual([]);
    expect(await collect(path, { format: 'jsonl' })).toEqual([{ line: 1, fields: { id: '1' } }]);
  });
});

describe('reading as the input arrives', () => {
  const LINES = 100_000;
  const line = (n: number): string => `{"id":"job-${n}","kind":"tts","text":"Sentence number ${n}."}\n`;
  /** The lines from `from` to `to`, both included, as one chunk. */
  const lines = (from: number, to: number): string => Array.from({ length: to - from + 1 }, (_, i) => line(from + i)).join('');
  const BLOCK = 1000;

  it(`a ${LINES.toLocaleString('en')}-line file: every record, in order, with its line`, async () => {
    const path = await file('big.jsonl', lines(1, LINES));
    let count = 0;
    for await (const item of readJobFile(path)) {
      count++;
      if (!('fields' in item) || item.line !== count || item.fields.id !== `job-${count}`) throw new Error(`line ${count}: ${JSON.stringify(item)}`);
    }
    expect(count).toBe(LINES);
  });

  it('the first record arrives before the input ends, and the writer is held back while nobody reads', async () => {
    const input = new PassThrough();
    const records = readJobFile(input);
    input.write(lines(1, BLOCK));
    const first = await records.next();
    expect(first.value).toEqual({ line: 1, fields: { id: 'job-1', kind: 'tts', text: 'Sentence number 1.' } });
    expect(input.writableEnded).toBe(false);

    // Nobody reads: the reader must not drain the input into memory.
    let next = BLOCK + 1;
    let written = Buffer.byteLength(lines(1, BLOCK));
    while (input.write(lines(next, next + BLOCK - 1))) {
      written += Buffer.byteLength(lines(next, next + BLOCK - 1));
      next += BLOCK;
      if (next > LINES) break;
    }
    expect(next).toBeLessThanOrEqual(10 * BLOCK);
    expect(written).toBeLessThan(Buffer.byteLength(lines(1, LINES)) / 10);

    // Reading again lets the rest through.
    const writer = (async () => {
      for (next += BLOCK; next <= LINES; next += BLOCK) {
        if (!input.write(lines(next, next + BLOCK - 1))) await once(input, 'drain');
      }
      input.end();
    })();
    let count = 1;
    for await (const item of records) {
      count++;
      if (!('fields' in item) || item.line !== count) throw new Error(`line ${count}: ${JSON.stringify(item)}`);
    }
    await writer;
    expect(count).toBe(LINES);
  });

  it.each(['jsonl', 'csv'] as const)('%s: leaving the loop early releases the input', async (format) => {
    const input = new PassThrough();
    input.write(format === 'csv' ? 'id,kind\n1,tts\n2,tts\n' : '{"id":"1"}\n{"id":"2"}\n');
    const seen: Item[] = [];
    for await (const item of readJobFile(input, { format })) {
      seen.push(item);
      break;
    }
    expect(seen).toEqual([{ line: format === 'csv' ? 2 : 1, fields: format === 'csv' ? { id: '1', kind: 'tts' } : { id: '1' } }]);
    expect(input.destroyed).toBe(true);
  });

  it('CSV from a stream: a row arrives before the input ends', async () => {
    const input = new PassThrough();
    const records = readJobFile(input, { format: 'csv' });
    input.write('id,kind\n1,tts\n2,tts\n');
    expect((await records.next()).value).toEqual({ line: 2, fields: { id: '1', kind: 'tts' } });
    expect(input.writableEnded).toBe(false);
    input.end('3,tts\n');
    const rest: Item[] = [];
    for await (const item of records) rest.push(item);
    expect(rest).toEqual([
      { line: 3, fields: { id: '2', kind: 'tts' } },
      { line: 4, fields: { id: '3', kind: 'tts' } },
    ]);
  });
});

describe('failures', () => {
  it('a missing file: JobFileError naming the path', async () => {
    const path = join(dir, 'no-such-jobs.jsonl');
    const error = await collect(path).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(JobFileError);
    expect(error).toMatchObject({ code: 'RTT_INPUT', label: path, retryable: false });
    expect((error as Error).message).toBe(`Cannot read the jobs file ${path}: no such file (ENOENT). Check the path.`);
    expect(((error as Error).cause as NodeJS.ErrnoException).code).toBe('ENOENT');
  });

  it('a directory: JobFileError naming the path', async () => {
    const path = join(dir, 'a-folder.csv');
    await mkdir(path);
    const error = await collect(path).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(JobFileError);
    expect((error as Error).message).toBe(`Cannot read the jobs file ${path}: it is a directory (EISDIR). Give the path of a .jsonl or .csv file.`);
  });

  it.each(['jsonl', 'csv'] as const)('%s: a stream that fails while read: JobFileError with the failure as its cause', async (format) => {
    const input = new PassThrough();
    const records = readJobFile(input, { format });
    input.write(format === 'csv' ? 'id,kind\n1,tts\n2,tts\n' : '{"id":"1"}\n');
    expect((await records.next()).done).toBe(false);
    const failure = Object.assign(new Error('input/output error'), { code: 'EIO' });
    input.destroy(failure);
    const error = await (async () => {
      for await (const item of records) void item;
    })().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(JobFileError);
    expect(error).toMatchObject({ label: 'the jobs stream', message: 'Cannot read the jobs stream: EIO (input/output error).', cause: failure });
  });

  it.each(['jsonl', 'csv'] as const)('%s: an abort while waiting for input: AbortError, and the stream is released', async (format) => {
    const input = new PassThrough();
    const controller = new AbortController();
    const records = readJobFile(input, { format, signal: controller.signal });
    input.write(format === 'csv' ? 'id,kind\n1,tts\n2,tts\n' : '{"id":"1","kind":"tts"}\n');
    expect((await records.next()).value).toEqual({ line: format === 'csv' ? 2 : 1, fields: { id: '1', kind: 'tts' } });
    const pending = records.next();
    controller.abort();
    const error = await pending.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(AbortError);
    expect(error).toMatchObject({ code: 'RTT_ABORTED' });
    expect(input.destroyed).toBe(true);
  });

  it('an abort between records stops at the next one', async () => {
    const controller = new AbortController();
    const records = readJobFile(await file('two.jsonl', '{"id":"1"}\n{"id":"2"}\n'), { signal: controller.signal });
    expect((await records.next()).value).toEqual({ line: 1, fields: { id: '1' } });
    controller.abort();
    await expect(records.next()).rejects.toBeInstanceOf(AbortError);
  });

  it.each([
    { options: { maxLineBytes: 0 }, field: 'maxLineBytes' },
    { options: { maxLineBytes: 1.5 }, field: 'maxLineBytes' },
    { options: { format: 'xml' as never }, field: 'format' },
  ])('a bad option ($field): ValidationError on the first read', async ({ options, field }) => {
    const error = await collect(await file('ok.jsonl', '{}\n'), options).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ValidationError);
    expect(error).toMatchObject({ field });
  });

  it('the default limit is 1 MiB', async () => {
    expect(DEFAULT_MAX_LINE_BYTES).toBe(1024 * 1024);
    // `{"t":"` and `"}` around the text: 8 bytes.
    const text = 'x'.repeat(DEFAULT_MAX_LINE_BYTES - 8);
    const items = await collect(await file('mib.jsonl', `{"t":"${text}"}\n{"t":"${text}x"}\n`));
    expect(items.map((item) => 'fields' in item)).toEqual([true, false]);
  });
});
