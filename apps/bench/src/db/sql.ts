import pg from 'pg';

/** One short-lived connection for one piece of work (the orchestrator's queries are few and far between). */
export async function withClient<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url, application_name: 'bench orchestrator' });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}
