/** A database URL with its password replaced by ***, for a URL the user gave (DATABASE_URL): it goes to a terminal. */
export function maskedUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return '(DATABASE_URL, not a URL)';
  }
}
