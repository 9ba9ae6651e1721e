import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

/**
 * The local TCP ports of the sockets process `pid` holds, read from Linux's /proc: a test maps them to
 * `pg_stat_activity.client_port` to know which server sessions are that process's. Empty where /proc cannot
 * be read (another OS, another user's process).
 */
export function tcpPortsOf(pid: number): number[] {
  let links: string[];
  try {
    links = readdirSync(`/proc/${pid}/fd`).map((fd) => {
      try {
        return readlinkSync(`/proc/${pid}/fd/${fd}`);
      } catch {
        return ''; // closed between the listing and the read
      }
    });
  } catch {
    return [];
  }
  const inodes = new Set(links.map((link) => /^socket:\[(\d+)\]$/.exec(link)?.[1]).filter((inode): inode is string => inode !== undefined));
  const ports: number[] = [];
  for (const table of [`/proc/${pid}/net/tcp`, `/proc/${pid}/net/tcp6`]) {
    let text: string;
    try {
      text = readFileSync(table, 'utf8');
    } catch {
      continue;
    }
    // Columns: sl, local_address (hex ip:port), rem_address, st, tx:rx queues, tr:when, retrnsmt, uid, timeout, inode.
    for (const line of text.split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      if (cols.length < 10 || !inodes.has(cols[9])) continue;
      ports.push(parseInt(cols[1].split(':')[1], 16));
    }
  }
  return ports;
}
