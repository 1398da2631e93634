import { createServer, type AddressInfo, type Socket } from 'node:net'

/** A TCP server on 127.0.0.1 that accepts every connection and never sends a byte (an SQS endpoint gone silent). */
export async function startSilentServer(): Promise<{ url: string; accepted: () => number; close(): Promise<void> }> {
  const sockets = new Set<Socket>()
  let accepted = 0
  const server = createServer(socket => {
    accepted++
    sockets.add(socket)
    socket.on('error', () => {})
    socket.on('close', () => sockets.delete(socket))
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    accepted: () => accepted,
    close: async () => {
      for (const s of sockets) s.destroy()
      await new Promise<void>(resolve => server.close(() => resolve()))
    },
  }
}
