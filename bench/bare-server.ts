/** A bare Fastify server (same framework, no database, no auth): the API benchmark's baseline. */
import Fastify from 'fastify';

const app = Fastify({ logger: false });
app.get('/bare', async () => ({ data: [], next_before: null }));
const url = await app.listen({ host: '127.0.0.1', port: 0 });
process.stdout.write(`${JSON.stringify({ url })}\n`);
process.on('SIGTERM', () => {
  void app.close().then(() => process.exit(0));
});
