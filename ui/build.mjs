// Builds the UI into dist/: the TypeScript app bundled and minified by esbuild (content-hashed
// names under dist/assets/, xterm.js split out and loaded only by the exec terminal),
// index.html pointing at them, and a .gz and .br beside every file, compressed once here so
// the agent serves them without compressing anything at run time.
//   node build.mjs            (npm run build)
import * as esbuild from 'esbuild';
import { readFileSync, writeFileSync, readdirSync, rmSync, statSync, mkdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { gzipSync, brotliCompressSync, constants } from 'node:zlib';

const dist = 'dist';
// Keep dist/.gitkeep: the Rust build watches the directory, which must exist.
for (const entry of readdirSync(dist, { withFileTypes: true })) {
  if (entry.name !== '.gitkeep') rmSync(join(dist, entry.name), { recursive: true, force: true });
}
mkdirSync(join(dist, 'assets'), { recursive: true });

const result = await esbuild.build({
  entryPoints: ['src/main.tsx'],
  bundle: true,
  splitting: true,
  format: 'esm',
  minify: true,
  target: ['es2022'],
  outdir: join(dist, 'assets'),
  entryNames: '[name]-[hash]',
  chunkNames: '[name]-[hash]',
  assetNames: '[name]-[hash]',
  metafile: true,
  legalComments: 'none',
  logLevel: 'warning',
});

const outputs = Object.entries(result.metafile.outputs);
const entry = outputs.find(([, o]) => o.entryPoint === 'src/main.tsx');
if (!entry) throw new Error('esbuild produced no entry for src/main.tsx');
const rel = (p) => relative(dist, p).split('\\').join('/');
const css = entry[1].cssBundle ? `<link rel="stylesheet" href="${rel(entry[1].cssBundle)}">` : '';
const html = readFileSync('src/index.html', 'utf8')
  .replace('<!--css-->', css)
  .replace('<!--js-->', `<script type="module" src="${rel(entry[0])}"></script>`);
writeFileSync(join(dist, 'index.html'), html);

// Precompress everything, at the highest levels (it happens once, at build time).
let raw = 0, br = 0, gz = 0;
const walk = (dir) => readdirSync(dir).flatMap((name) => {
  const path = join(dir, name);
  return statSync(path).isDirectory() ? walk(path) : [path];
});
for (const file of walk(dist)) {
  if (file.endsWith('.gitkeep')) continue;
  const bytes = readFileSync(file);
  const brotli = brotliCompressSync(bytes, { params: { [constants.BROTLI_PARAM_QUALITY]: 11 } });
  const gzip = gzipSync(bytes, { level: 9 });
  writeFileSync(file + '.br', brotli);
  writeFileSync(file + '.gz', gzip);
  raw += bytes.length; br += brotli.length; gz += gzip.length;
}
const kib = (n) => (n / 1024).toFixed(1) + ' KiB';
console.log(`ui/dist: ${kib(raw)} raw, ${kib(gz)} gzip, ${kib(br)} brotli`);
// The budget: the whole UI under 500 KiB compressed.
if (gz > 500 * 1024) {
  console.error(`the compressed UI is ${kib(gz)}, over its 500 KiB budget`);
  process.exit(1);
}
