// cron_ref.js: the reference side of test_cron_diff.py: next fire times from cron-parser@4.
//
// Reads "EXPR<TAB>TZ<TAB>START_EPOCH" lines on stdin and prints, for each, one line:
// "ok T1 T2 ... TN" (UTC epoch seconds, strictly after START) or "error MESSAGE".
// Usage: node cron_ref.js N [NODE_MODULES_DIR]
'use strict';

const path = require('path');
const readline = require('readline');

const count = parseInt(process.argv[2] || '5', 10);
const modules = process.argv[3] || path.join(__dirname, '..', 'node_modules');
const parser = require(path.join(modules, 'cron-parser'));

const rl = readline.createInterface({ input: process.stdin, terminal: false });
const out = [];
rl.on('line', (line) => {
  const [expr, tz, start] = line.split('\t');
  try {
    const it = parser.parseExpression(expr, {
      currentDate: new Date(Number(start) * 1000),
      tz: tz || 'UTC',
    });
    const times = [];
    for (let i = 0; i < count; i++)
      times.push(Math.round(it.next().getTime() / 1000));
    out.push('ok ' + times.join(' '));
  } catch (err) {
    out.push('error ' + String(err.message).replace(/\s+/g, ' '));
  }
});
rl.on('close', () => {
  process.stdout.write(out.join('\n') + (out.length ? '\n' : ''));
});
