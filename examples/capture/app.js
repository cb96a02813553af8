// The example capture page: everything a browser integration needs, with the client package
// (bundled as ./client.js by serve.mjs) doing the crop, the hashing, the multipart body and
// the retries. The page never decides a verdict from HTTP 200: it shows the package's verdict.
import { buildCapture, createVerifyClient, eyeCrop320 } from './client.js';

const $ = (id) => document.getElementById(id);
const source = $('source');
const crop = $('crop');
const points = ['x0', 'y0', 'x1', 'y1'].map($);
let image = null; // ImageData of the picked file
let cropBytes = null; // 307200 RGB bytes
let nextPoint = 0;

$('service-url').value = new URLSearchParams(location.search).get('service') ?? location.origin;

$('file').addEventListener('change', async () => {
  const file = $('file').files[0];
  if (!file) return;
  // 'none': the pixels as stored, as a capture device would send them
  const bitmap = await createImageBitmap(file, { colorSpaceConversion: 'none', premultiplyAlpha: 'none' });
  source.width = bitmap.width;
  source.height = bitmap.height;
  const ctx = source.getContext('2d', { willReadFrequently: true });
  ctx.drawImage(bitmap, 0, 0);
  image = ctx.getImageData(0, 0, bitmap.width, bitmap.height);
  $('source-info').textContent = `${file.name}: ${bitmap.width} x ${bitmap.height}`;
  nextPoint = 0;
  update();
});

source.addEventListener('click', (e) => {
  if (!image) return;
  // canvas pixels, whatever size the page shows the canvas at
  const rect = source.getBoundingClientRect();
  const x = Math.round(((e.clientX - rect.left) * source.width) / rect.width);
  const y = Math.round(((e.clientY - rect.top) * source.height) / rect.height);
  points[nextPoint * 2].value = String(x);
  points[nextPoint * 2 + 1].value = String(y);
  nextPoint = (nextPoint + 1) % 2;
  update();
});
for (const input of points) input.addEventListener('input', update);

function eyes() {
  const v = points.map((p) => Number(p.value));
  if (points.some((p) => p.value === '') || !v.every(Number.isFinite)) return null;
  const pair = [[v[0], v[1]], [v[2], v[3]]];
  // the service wants the pair sorted by x
  return pair.sort((a, b) => a[0] - b[0]);
}

function update() {
  const pair = eyes();
  cropBytes = null;
  $('send').disabled = true;
  drawMarks(pair);
  if (!image || !pair || (pair[0][0] === pair[1][0] && pair[0][1] === pair[1][1])) return;
  cropBytes = eyeCrop320(image, pair);
  const rgba = new ImageData(320, 320);
  for (let p = 0; p < 320 * 320; p++) {
    rgba.data[p * 4] = cropBytes[p * 3];
    rgba.data[p * 4 + 1] = cropBytes[p * 3 + 1];
    rgba.data[p * 4 + 2] = cropBytes[p * 3 + 2];
    rgba.data[p * 4 + 3] = 255;
  }
  crop.getContext('2d').putImageData(rgba, 0, 0);
  crop.dataset.ready = 'true';
  $('send').disabled = false;
}

function drawMarks(pair) {
  if (!image) return;
  const ctx = source.getContext('2d');
  ctx.putImageData(image, 0, 0);
  ctx.strokeStyle = '#00e0ff';
  ctx.lineWidth = Math.max(2, source.width / 300);
  const first = points[0].value !== '' && points[1].value !== '' ? [[+points[0].value, +points[1].value]] : [];
  for (const [x, y] of pair ?? first) {
    ctx.beginPath();
    ctx.arc(x, y, ctx.lineWidth * 4, 0, 2 * Math.PI);
    ctx.stroke();
  }
}

$('send').addEventListener('click', async () => {
  const pair = eyes();
  if (!cropBytes || !pair) return;
  const verdict = $('verdict');
  verdict.dataset.state = 'sending';
  verdict.textContent = 'Sending...';
  $('send').disabled = true;
  try {
    const { metadata, files } = await buildCapture({
      mode: 'rgb_single',
      frames: [{ timestamp_us: 0, source_size: [image.width, image.height], eyes_xy: pair, image: { bytes: cropBytes } }],
    });
    crop.dataset.sha256 = metadata.frames[0].image.sha256;
    const client = createVerifyClient({ baseUrl: $('service-url').value, token: $('token').value.trim() });
    const outcome = await client.verify('rgb_liveness', metadata, files);
    $('request-id').textContent = outcome.requestId ?? 'none (no answer)';
    if (outcome.kind === 'completed') {
      const v = outcome.verdicts[0];
      const score = outcome.response.results[0].score;
      verdict.dataset.state = v.verdict;
      verdict.textContent = v.verdict === 'retry' ? `retry (${v.reason})` : `${v.verdict} (score ${score?.toFixed(3)})`;
    } else {
      verdict.dataset.state = 'error';
      verdict.dataset.code = outcome.code;
      verdict.textContent = `${outcome.code}: ${outcome.message}${outcome.retryable ? ' (may be retried later)' : ''}`;
    }
  } catch (err) {
    verdict.dataset.state = 'error';
    verdict.textContent = String(err?.message ?? err);
  } finally {
    $('send').disabled = cropBytes === null;
  }
});
