import type { Page } from 'playwright-core';

/** What the checks read in the page (the test's tsconfig has no DOM types). */
export interface Measured {
  page: number;
  screen: number;
  /** Elements whose right edge passes the screen's, as "tag.class". */
  wide: string[];
  /** Table cells whose text is cut (scrollWidth past clientWidth while not wrapping). */
  clipped: string[];
}

/** Whether a page fits its screen: its width, elements past the right edge, table cells whose text is cut. */
export async function measure(page: Page): Promise<Measured> {
  return page.evaluate(() => {
    type El = { tagName: string; className: string; scrollWidth: number; clientWidth: number; textContent: string; getBoundingClientRect(): { right: number; width: number }; closest(s: string): El | null };
    const win = globalThis as unknown as { innerWidth: number; document: { documentElement: { scrollWidth: number }; querySelectorAll(s: string): ArrayLike<El> } };
    const all = Array.from(win.document.querySelectorAll('body *'));
    // Inside a scrolling <pre> (a payload or a stack) a long line scrolls in its own box, as it should; so does a flow's
    // graph (.dag: drawn to scale, its names readable, in a box that fits the screen and scrolls both ways).
    const wide = all.filter((e) => e.getBoundingClientRect().width > 0 && e.getBoundingClientRect().right > win.innerWidth + 1 && !e.closest('pre, .dag')).map((e) => `${e.tagName.toLowerCase()}.${e.className}`);
    const clipped = Array.from(win.document.querySelectorAll('td, th'))
      .filter((c) => c.scrollWidth > c.clientWidth + 1)
      .map((c) => `${c.tagName.toLowerCase()}.${c.className}: ${c.textContent.slice(0, 60)}`);
    return { page: win.document.documentElement.scrollWidth, screen: win.innerWidth, wide, clipped };
  });
}
