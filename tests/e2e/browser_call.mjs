// Headless Chromium joins the Parley call page with a fake microphone playing a WAV, stays for a while,
// then prints what the page saw as one JSON line (transcripts, agent state, latency messages, audio levels,
// inbound audio stats) and saves a screenshot. Runs inside the e2e network namespace.
//
//   node tests/e2e/browser_call.mjs --url http://127.0.0.1:8080/ --wav mic.wav \
//        --seconds 40 --out DIR [--chromium /usr/bin/chromium]
import { createRequire } from 'node:module';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const require = createRequire(new URL('../../web/package.json', import.meta.url));
const { chromium } = require('playwright-core');

function parseArgs(argv) {
  const args = { chromium: '/usr/bin/chromium', seconds: 40 };
  for (let i = 0; i < argv.length; i += 2) args[argv[i].replace(/^--/, '')] = argv[i + 1];
  for (const need of ['url', 'wav', 'out']) {
    if (!args[need]) {
      console.error(`browser_call: --${need} is required`);
      process.exit(2);
    }
  }
  return args;
}

const args = parseArgs(process.argv.slice(2));
const profile = mkdtempSync(join(tmpdir(), 'parley-chromium-'));
const flags = [
  '--use-fake-ui-for-media-stream',
  '--use-fake-device-for-media-stream',
  `--use-file-for-fake-audio-capture=${args.wav}%noloop`,
  '--autoplay-policy=no-user-gesture-required',
  '--allow-loopback-in-peer-connection',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-features=WebRtcHideLocalIpsWithMdns',
];

let context;
const log = [];
try {
  context = await chromium.launchPersistentContext(profile, {
    executablePath: args.chromium,
    headless: true,
    args: flags,
    viewport: { width: 1100, height: 800 },
  });
  const page = context.pages()[0] ?? (await context.newPage());
  page.on('console', (msg) => log.push(`${msg.type()}: ${msg.text()}`.slice(0, 300)));
  page.on('pageerror', (err) => log.push(`pageerror: ${err.message}`.slice(0, 300)));
  const started = Date.now();
  await page.goto(args.url);
  await page.click('#join'); // the page never joins by itself (no autojoin link)
  await page.waitForFunction(() => window.parley?.connection === 'connected', null, { timeout: 30000 });
  const connectedMs = Date.now() - started;
  // the server picked the room; tell the test which (it sends a probe message there)
  writeFileSync(join(args.out, 'room.txt'), await page.textContent('#room-name'));
  await page.waitForTimeout(Number(args.seconds) * 1000);
  const state = await page.evaluate(async () => {
    const p = window.parley;
    return {
      connection: p.connection,
      agentState: p.agentState,
      transcripts: p.transcripts,
      metrics: p.metrics,
      levels: p.levels,
      errors: p.errors,
      inbound: await p.inboundAudio(),
      shownTranscripts: [...document.querySelectorAll('#transcripts li')].map((li) => li.className),
      shownMetrics: [...document.querySelectorAll('#metrics tr')].map((tr) => tr.textContent),
    };
  });
  await page.screenshot({ path: join(args.out, 'page.png') });
  writeFileSync(join(args.out, 'browser.json'), JSON.stringify({ connectedMs, ...state, log }));
  console.log(JSON.stringify({ connectedMs, transcripts: state.transcripts.length, inbound: state.inbound }));
} catch (err) {
  console.error(`browser_call: ${err.message.split('\n')[0]}`);
  console.error(log.slice(-10).join('\n'));
  process.exitCode = 1;
} finally {
  await context?.close();
  rmSync(profile, { recursive: true, force: true });
}
