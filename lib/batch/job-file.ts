/**
 * The jobs file of batch mode, read as a stream of records: JSON Lines (one JSON object a line)
 * or CSV with a header row (parsed by `csv-parse`). Memory stays bounded whatever the file's
 * length: the input is read as it is consumed, and no line is held beyond `maxLineBytes`.
 *
 * `readJobFile` yields a `JobRecord` for each job, with the line where it starts, and a
 * `JobLineProblem` for each line that holds no readable job (not JSON, not an object, a CSV row
 * with the wrong number of cells, a line too long); reading goes on after a problem, except
 * where the rest of a CSV file cannot be told apart (a header without usable names, a quoted
 * cell never closed, a record too long). What the fields mean is checked elsewhere: values are
 * as the file has them (CSV cells stay strings; an empty cell is absent).
 *
 * CSV line numbers are counted here from each record's raw text, a CRLF as one line break
 * wherever it is (`csv-parse` counts a CRLF inside a quoted cell as two). The CSV parser looks a
 * few bytes ahead: from a stream, a row arrives once the next one has begun or the input ends.
 */
import type { FileHandle } from 'node:fs/promises';
import { open } from 'node:fs/promises';
import { extname } from 'node:path';
import { Readable, addAbortSignal } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { CsvError, Parser } from 'csv-parse';
import { AbortError, JobFileError, ValidationError } from '../errors.js';
import { describeReceived, intOption } from '../options.js';

export type JobFileFormat = 'jsonl' | 'csv';

/** One job as the file has it. */
export interface JobRecord {
  /** The 1-based line where the record starts (in CSV the header is line 1). */
  line: number;
  fields: Record<string, unknown>;
}

/** A line that could not be read as a job. */
export interface JobLineProblem {
  line: number;
  message: string;
}

export interface ReadJobFileOptions {
  /** By default: from the extension of a path, else from the first non-blank byte. */
  format?: JobFileFormat;
  /** Longest line read, in bytes without its line break (in CSV: a record, in characters of its cells); default 1 MiB. */
  maxLineBytes?: number;
  signal?: AbortSignal;
}

export const DEFAULT_MAX_LINE_BYTES = 1024 * 1024;

const FORMATS: readonly JobFileFormat[] = ['jsonl', 'csv'];
const BY_EXTENSION: Readonly<Record<string, JobFileFormat>> = { '.jsonl': 'jsonl', '.ndjson': 'jsonl', '.json': 'jsonl', '.csv': 'csv' };
const BOM = Buffer.from([0xef, 0xbb, 0xbf]);
/** Bytes looked at, at most, to find the first non-blank one. */
const SNIFF_BYTES = 64 * 1024;
const STREAM_LABEL = 'the jobs stream';

/**
 * The format of a jobs file: by the extension of `path` (`.jsonl`, `.ndjson`, `.json`: JSON
 * Lines; `.csv`: CSV), else by the first non-blank byte of `firstBytes` after a byte order
 * mark (`{`: JSON Lines; anything else, or nothing: CSV).
 */
export function jobFileFormat(path: string, firstBytes?: Buffer): JobFileFormat {
  const byName = formatByName(path);
  if (byName !== undefined) return byName;
  const first = firstBytes === undefined ? -1 : firstNonBlank(firstBytes);
  return first !== -1 && firstBytes![first] === 0x7b ? 'jsonl' : 'csv';
}

function formatByName(path: string): JobFileFormat | undefined {
  return BY_EXTENSION[extname(path).toLowerCase()];
}

/** Index of the first byte that is not a BOM, space, tab, CR or LF; -1 when there is none. */
function firstNonBlank(bytes: Buffer): number {
  for (let i = bytes.subarray(0, 3).equals(BOM) ? 3 : 0; i < bytes.length; i++) {
    const byte = bytes[i];
    if (byte !== 0x20 && byte !== 0x09 && byte !== 0x0d && byte !== 0x0a) return i;
  }
  return -1;
}

/**
 * Reads a jobs file (a path, or a readable stream such as standard input) record by record.
 * The format is `options.format`, else detected (`jobFileFormat`). Throws `JobFileError` when
 * the input cannot be opened or read, `AbortError` when `signal` aborts, `ValidationError` for
 * a bad option; the first read throws them.
 */
export async function* readJobFile(input: string | NodeJS.ReadableStream, options: ReadJobFileOptions = {}): AsyncGenerator<JobRecord | JobLineProblem> {
  const maxLineBytes = intOption(options.maxLineBytes, 'maxLineBytes', { min: 1, fallback: DEFAULT_MAX_LINE_BYTES });
  if (options.format !== undefined && !FORMATS.includes(options.format)) {
    throw new ValidationError('format', "'jsonl' or 'csv'", describeReceived(options.format));
  }
  const { signal } = options;
  if (signal?.aborted) throw aborted(signal);
  const label = typeof input === 'string' ? input : STREAM_LABEL;
  const stream = typeof input === 'string' ? await openJobFile(input) : input;
  if (signal !== undefined && stream instanceof Readable) addAbortSignal(signal, stream);
  let chunks: AsyncIterable<Buffer> = bytesOf(stream, label, signal);
  const path = typeof input === 'string' ? input : '';
  let format = options.format ?? formatByName(path);
  if (format === undefined) ({ format, chunks } = await sniff(chunks, path));
  // The CSV parser reads ahead: on leaving early, the input is released before it is waited for.
  const release = (): void => {
    if (stream instanceof Readable) stream.destroy();
  };
  const items = format === 'jsonl' ? jsonLines(chunks, maxLineBytes) : csvRecords(chunks, maxLineBytes, release);
  for await (const item of items) {
    if (signal?.aborted) throw aborted(signal);
    yield item;
  }
}

function aborted(signal: AbortSignal, cause: unknown = signal.reason): AbortError {
  return new AbortError('Reading the jobs file was aborted.', { cause });
}

async function openJobFile(path: string): Promise<Readable> {
  let handle: FileHandle;
  try {
    handle = await open(path, 'r');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const what = code === 'ENOENT' ? 'no such file (ENOENT)' : (code ?? (error as Error).message);
    throw new JobFileError(`Cannot read the jobs file ${path}: ${what}. Check the path.`, { cause: error, label: path });
  }
  if ((await handle.stat()).isDirectory()) {
    await handle.close();
    throw new JobFileError(`Cannot read the jobs file ${path}: it is a directory (EISDIR). Give the path of a .jsonl or .csv file.`, { label: path });
  }
  return handle.createReadStream();
}

/** The input's bytes; a failure to read becomes a `JobFileError` (or `AbortError`). */
async function* bytesOf(stream: NodeJS.ReadableStream, label: string, signal: AbortSignal | undefined): AsyncGenerator<Buffer> {
  try {
    for await (const chunk of stream) yield typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
  } catch (error) {
    if (signal?.aborted) throw aborted(signal, error);
    const code = (error as NodeJS.ErrnoException | undefined)?.code;
    const message = (error instanceof Error ? error.message : String(error)).replace(/\.$/, '');
    const name = label === STREAM_LABEL ? label : `the jobs file ${label}`;
    throw new JobFileError(`Cannot read ${name}: ${typeof code === 'string' ? `${code} (${message})` : message}.`, { cause: error, label });
  }
}

/** Reads up to the first non-blank byte to tell the format; the chunks read are given back in front. */
async function sniff(chunks: AsyncIterable<Buffer>, path: string): Promise<{ format: JobFileFormat; chunks: AsyncIterable<Buffer> }> {
  const iterator = chunks[Symbol.asyncIterator]();
  const head: Buffer[] = [];
  let bytes = Buffer.alloc(0);
  // A BOM may still be arriving while fewer than 3 bytes are in.
  while (bytes.length < SNIFF_BYTES && (firstNonBlank(bytes) === -1 || (bytes.length < 3 && BOM.subarray(0, bytes.length).equals(bytes)))) {
    const next = await iterator.next();
    if (next.done === true) break;
    head.push(next.value);
    bytes = Buffer.concat([bytes, next.value]);
  }
  async function* replay(): AsyncGenerator<Buffer> {
    yield* head;
    yield* { [Symbol.asyncIterator]: () => iterator };
  }
  return { format: jobFileFormat(path, bytes), chunks: replay() };
}

/* ----------------------------------------------------------------------------------------- */
/* JSON Lines                                                                                */

/** A line cut from the input: its text, or the mark that it was longer than the limit. */
type Line = { line: number; text: string } | { line: number; tooLong: true };

/**
 * Cuts bytes into lines at LF, whatever the chunking. A line being read is kept as the chunks'
 * slices, joined once at its end; one longer than `maxLineBytes` is dropped as it comes and
 * reported once. A trailing CR is removed, and a BOM at the start of the first line.
 */
class LineCutter {
  readonly #maxLineBytes: number;
  #parts: Buffer[] = [];
  #bytes = 0;
  #tooLong = false;
  #line = 1;

  constructor(maxLineBytes: number) {
    this.#maxLineBytes = maxLineBytes;
  }

  *push(chunk: Buffer): Generator<Line> {
    for (let start = 0; start < chunk.length;) {
      const lf = chunk.indexOf(0x0a, start);
      const end = lf === -1 ? chunk.length : lf;
      this.#keep(chunk.subarray(start, end));
      if (lf === -1) return;
      yield this.#cut();
      start = lf + 1;
    }
  }

  /** The last line, when the input does not end with a line break. */
  *end(): Generator<Line> {
    if (this.#bytes > 0 || this.#tooLong) yield this.#cut();
  }

  #keep(part: Buffer): void {
    if (this.#tooLong || part.length === 0) return;
    // One byte more than the limit may be the CR of a CRLF.
    if (this.#bytes + part.length > this.#maxLineBytes + 1) {
      this.#tooLong = true;
      this.#parts = [];
      this.#bytes = 0;
      return;
    }
    this.#parts.push(part);
    this.#bytes += part.length;
  }

  #cut(): Line {
    const line = this.#line++;
    let bytes = this.#parts.length === 1 ? this.#parts[0]! : Buffer.concat(this.#parts, this.#bytes);
    const tooLong = this.#tooLong;
    this.#parts = [];
    this.#bytes = 0;
    this.#tooLong = false;
    if (bytes.at(-1) === 0x0d) bytes = bytes.subarray(0, -1);
    if (tooLong || bytes.length > this.#maxLineBytes) return { line, tooLong: true };
    if (line === 1 && bytes.subarray(0, 3).equals(BOM)) bytes = bytes.subarray(3);
    return { line, text: bytes.toString('utf8') };
  }
}

function tooLong(line: number, maxLineBytes: number): JobLineProblem {
  return { line, message: `longer than ${maxLineBytes} bytes: not read (raise maxLineBytes, or shorten the job)` };
}

async function* jsonLines(chunks: AsyncIterable<Buffer>, maxLineBytes: number): AsyncGenerator<JobRecord | JobLineProblem> {
  const cutter = new LineCutter(maxLineBytes);
  for await (const chunk of chunks) {
    for (const line of cutter.push(chunk)) {
      const item = jsonLine(line, maxLineBytes);
      if (item !== undefined) yield item;
    }
  }
  for (const line of cutter.end()) {
    const item = jsonLine(line, maxLineBytes);
    if (item !== undefined) yield item;
  }
}

/** The record or problem of one line; undefined for a blank line. */
function jsonLine(cut: Line, maxLineBytes: number): JobRecord | JobLineProblem | undefined {
  const { line } = cut;
  if ('tooLong' in cut) return tooLong(line, maxLineBytes);
  if (cut.text.trim() === '') return undefined;
  let value: unknown;
  try {
    value = JSON.parse(cut.text);
  } catch (error) {
    return { line, message: `not JSON: ${(error as Error).message}` };
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return { line, message: `expected a JSON object ({"id": ..., "kind": ...}), got ${describeReceived(value)}` };
  }
  return { line, fields: value as Record<string, unknown> };
}

/* ----------------------------------------------------------------------------------------- */
/* CSV                                                                                       */

/** Line breaks in `text`: CRLF, LF and CR each count one. */
function lineBreaks(text: string): number {
  let count = 0;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code === 0x0a || (code === 0x0d && text.charCodeAt(i + 1) !== 0x0a)) count++;
  }
  return count;
}

/** Column names trimmed, or the problem of a header without a usable name for each column. */
function headerOf(cells: readonly string[], line: number): string[] | JobLineProblem {
  const names = cells.map((cell) => cell.trim());
  const first = new Map<string, number>();
  for (const [i, name] of names.entries()) {
    if (name === '') return { line, message: `column ${i + 1} of the header row has no name: name every column (id,kind,...)` };
    const earlier = first.get(name);
    if (earlier !== undefined) return { line, message: `column name "${name}" appears twice in the header row (columns ${earlier + 1} and ${i + 1})` };
    first.set(name, i);
  }
  return names;
}

/** A parsed record: its cells and its text as in the file. */
interface CsvRow {
  record: string[];
  raw: string;
}

/**
 * `csv-parse`'s parser, with its failure delivered in order after the records parsed before it
 * (a failing parser would be destroyed, and the records it had parsed from the same chunk lost).
 * After a failure, the rest of the input is consumed and dropped.
 */
class OrderedCsvParser extends Parser {
  #failed = false;

  override _transform(chunk: Buffer, encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    if (this.#failed) return callback();
    super._transform(chunk, encoding, (error?: Error | null) => this.#settle(error, callback));
  }

  override _flush(callback: (error?: Error | null) => void): void {
    if (this.#failed) return callback();
    super._flush((error?: Error | null) => this.#settle(error, callback));
  }

  #settle(error: Error | null | undefined, callback: (error?: Error | null) => void): void {
    if (error instanceof CsvError) {
      this.#failed = true;
      this.push({ failure: error });
      return callback();
    }
    callback(error);
  }
}

function csvFailure(error: CsvError, line: number, maxLineBytes: number): JobLineProblem {
  if (error.code === 'CSV_MAX_RECORD_SIZE') return { line, message: `${tooLong(line, maxLineBytes).message}; the rest of the file is not read` };
  if (error.code === 'CSV_QUOTE_NOT_CLOSED') return { line, message: 'a quoted cell that starts in this record is never closed: the file ends inside it' };
  return { line, message: `not readable as CSV (${error.code}); the rest of the file is not read` };
}

/** Records of CSV `chunks`; `release` ends the input they come from (called on leaving, whatever the reason). */
async function* csvRecords(chunks: AsyncIterable<Buffer>, maxLineBytes: number, release: () => void): AsyncGenerator<JobRecord | JobLineProblem> {
  const parser = new OrderedCsvParser({
    bom: true,
    raw: true,
    record_delimiter: ['\r\n', '\n', '\r'],
    relax_column_count: true,
    relax_quotes: true,
    max_record_size: maxLineBytes,
  });
  // A failure to read reaches the loop below through the parser.
  const feeding = pipeline(chunks, parser).catch(() => undefined);
  let next = 1;
  let header: string[] | undefined;
  try {
    for await (const row of parser as AsyncIterable<CsvRow | { failure: CsvError }>) {
      if ('failure' in row) {
        yield csvFailure(row.failure, next, maxLineBytes);
        return;
      }
      const { record, raw } = row;
      const line = next;
      next += lineBreaks(raw);
      if (record.every((cell) => cell === '')) continue;
      if (header === undefined) {
        const names = headerOf(record, line);
        if (!Array.isArray(names)) {
          yield names;
          return;
        }
        header = names;
      } else if (record.length !== header.length) {
        yield { line, message: `${record.length} cells where the header has ${header.length} columns` };
      } else {
        const names = header;
        yield { line, fields: Object.fromEntries(record.flatMap((cell, i) => (cell === '' ? [] : [[names[i], cell]]))) };
      }
    }
  } finally {
    parser.destroy();
    release();
    await feeding;
  }
  if (header === undefined) yield { line: 1, message: 'no header row: a CSV jobs file starts with the names of its columns (id,kind,...)' };
}
