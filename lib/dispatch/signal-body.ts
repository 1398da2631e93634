/** The project named by a signal body `{"project":"…"}`, or undefined when the body is not one. */
export function parseSignal(body: string): string | undefined {
  try {
    const parsed: unknown = JSON.parse(body)
    if (
      typeof parsed === 'object' &&
      parsed !== null &&
      'project' in parsed &&
      typeof parsed.project === 'string' &&
      parsed.project.length > 0
    ) {
      return parsed.project
    }
  } catch {
    // falls through: not JSON
  }
  return undefined
}
