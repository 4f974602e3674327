/**
 * The documentation's links lead somewhere. Every relative link of README.md and of the guides
 * under docs/ (the generated reference under docs/api/ aside) names a file of the repository, and
 * every `#anchor` (in the same document or another) is the GitHub slug of one of that document's
 * headings, as github.com renders it. Links inside code are not links; `http(s):` and `mailto:`
 * links are left to the reader.
 */
import { describe, expect, it } from 'vitest';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));

const documents = [
  'README.md',
  ...readdirSync(join(root, 'docs'), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.md') && !f.startsWith('api/'))
    .sort()
    .map((f) => `docs/${f}`),
];

/** The text with fenced blocks and code spans blanked out (line numbers kept). */
function prose(text: string): string {
  return text
    .replace(/^```[^\n]*\n[\s\S]*?^```$/gm, (block) => block.replace(/[^\n]/g, ' '))
    .replace(/(`+)[\s\S]*?\1/g, (span) => (span.includes('\n') ? span.replace(/[^\n]/g, ' ') : ' '));
}

/**
 * A heading's anchor as GitHub makes it (github-slugger): lower case, markup and punctuation
 * dropped, each space a hyphen; a repeated slug gets -1, -2, ...
 */
function githubSlug(heading: string, seen: Map<string, number>): string {
  const base = heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replace(/ /g, '-');
  const count = seen.get(base) ?? 0;
  seen.set(base, count + 1);
  return count === 0 ? base : `${base}-${count}`;
}

/** The anchors of a Markdown document: its headings' slugs (headings inside code blocks are not headings). */
function anchorsOf(text: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  const withoutBlocks = text.replace(/^```[^\n]*\n[\s\S]*?^```$/gm, '');
  for (const [, heading] of withoutBlocks.matchAll(/^#{1,6}[ \t]+(.+?)[ \t#]*$/gm)) anchors.add(githubSlug(heading!, seen));
  return anchors;
}

interface Link {
  where: string;
  target: string;
}

function linksOf(name: string, text: string): Link[] {
  const links: Link[] = [];
  const lines = prose(text).split('\n');
  lines.forEach((line, i) => {
    for (const [, target] of line.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) links.push({ where: `${name}:${i + 1}`, target: target! });
  });
  return links;
}

const texts = new Map(documents.map((name) => [name, readFileSync(join(root, name), 'utf8')]));
const links = [...texts].flatMap(([name, text]) => linksOf(name, text));
const relativeLinks = links.filter(({ target }) => !/^[a-z][a-z0-9+.-]*:/i.test(target));

describe('githubSlug', () => {
  it.each([
    { heading: '`RealtimeTranslateStream` (Duplex)', slug: 'realtimetranslatestream-duplex' },
    { heading: 'In your own page: `rt-translate/browser`', slug: 'in-your-own-page-rt-translatebrowser' },
    { heading: 'Ctrl-C and exit status', slug: 'ctrl-c-and-exit-status' },
    { heading: 'Translate speech: `rt-translate [translate]`', slug: 'translate-speech-rt-translate-translate' },
    { heading: 'One speaker, several languages: `RealtimeFanout` (Writable)', slug: 'one-speaker-several-languages-realtimefanout-writable' },
  ])('$heading -> #$slug', ({ heading, slug }) => {
    expect(githubSlug(heading, new Map())).toBe(slug);
  });

  it('a repeated heading gets -1, -2', () => {
    const seen = new Map<string, number>();
    expect(['Express', 'Express', 'Express'].map((h) => githubSlug(h, seen))).toEqual(['express', 'express-1', 'express-2']);
  });
});

describe('the documentation: links', () => {
  it('the README links to every guide', () => {
    const fromReadme = new Set(relativeLinks.filter((l) => l.where.startsWith('README.md:')).map((l) => l.target.split('#')[0]));
    expect(documents.filter((d) => d !== 'README.md' && !fromReadme.has(d))).toEqual([]);
  });

  it('there are links to check, within documents and across them', () => {
    expect(relativeLinks.filter((l) => l.target.startsWith('#')).length).toBeGreaterThan(5);
    expect(relativeLinks.filter((l) => /\.md#/.test(l.target)).length).toBeGreaterThan(5);
  });

  it('every relative link names a file that exists, and every #anchor a heading of it', () => {
    const broken: string[] = [];
    for (const { where, target } of relativeLinks) {
      const [path, anchor] = target.split('#') as [string, string | undefined];
      const from = where.slice(0, where.lastIndexOf(':'));
      const file = path === '' ? from : relative(root, join(root, dirname(from), decodeURIComponent(path)));
      if (file.startsWith('..') || !existsSync(join(root, file))) {
        broken.push(`${where}: ${target}: no file ${file}`);
        continue;
      }
      if (anchor === undefined) continue;
      if (!file.endsWith('.md')) {
        broken.push(`${where}: ${target}: an anchor into a file that is not Markdown`);
        continue;
      }
      const text = texts.get(file) ?? readFileSync(join(root, file), 'utf8');
      if (!anchorsOf(text).has(decodeURIComponent(anchor))) broken.push(`${where}: ${target}: no heading of ${file} has the anchor #${anchor}`);
    }
    expect(broken).toEqual([]);
  });
});
