/**
 * A TypeDoc plugin for `npm run docs` / `npm run docs:check`: the "every public export has a doc
 * comment" rule for properties.
 *
 * TypeDoc's own `notDocumented` check (typedoc.json's `requiredToBeDocumented`) covers the exported
 * declarations, their methods and call signatures. Left to it, properties would be required at every
 * depth: each field of every anonymous object type that TypeDoc expands in place (a Schema-derived
 * type can be expanded in several places, some with no source to put a comment on). So "Property" is
 * left out of that list, and this plugin asks instead for a comment on each property a reader looks
 * up by name: the members of a public interface or class, and of a type alias of an object type,
 * declared in this package. Nested anonymous object types are described by their property's comment.
 * A missing comment is a validation warning, which typedoc.json turns into an error.
 */
import { Application, ReflectionKind } from "typedoc"

/**
 * `type X = { ... }`, whose properties read like an interface's (not a union's members, nor a nested literal).
 * @param {import("typedoc").Reflection | undefined} alias
 * @param {import("typedoc").Reflection} literal
 */
const isObjectTypeAlias = (alias, literal) =>
  alias !== undefined &&
  alias.kindOf(ReflectionKind.TypeAlias) &&
  "type" in alias &&
  alias.type?.type === "reflection" &&
  alias.type.declaration === literal

/** @param {import("typedoc").Application} app */
export function load(app) {
  app.on(Application.EVENT_VALIDATE_PROJECT, (project) => {
    if (!app.options.getValue("validation").notDocumented) return
    const members = project.getReflectionsByKind(ReflectionKind.Property | ReflectionKind.Accessor)
    for (const reflection of members) {
      const parent = reflection.parent
      if (parent === undefined) continue
      const named =
        parent.kindOf(ReflectionKind.Interface | ReflectionKind.Class) ||
        (parent.kindOf(ReflectionKind.TypeLiteral) && isObjectTypeAlias(parent.parent, parent))
      if (!named) continue
      // An inherited member is documented (or reported) where it is declared.
      if ("inheritedFrom" in reflection && reflection.inheritedFrom !== undefined) continue
      if (reflection.hasComment()) continue
      const accessorSignatures = reflection.kindOf(ReflectionKind.Accessor)
        ? [reflection.getSignature, reflection.setSignature]
        : []
      if (accessorSignatures.some((signature) => signature?.hasComment())) continue
      const symbolId = project.getSymbolIdFromReflection(reflection)
      // Only what this package declares (not Effect's, not the platform's), at a real place in src/.
      if (symbolId === undefined || symbolId.packageName !== project.packageName) continue
      if (!symbolId.packagePath.startsWith("src/")) continue
      const source = reflection.sources?.[0]
      const where = source === undefined ? symbolId.packagePath : `${source.fileName}:${source.line}`
      app.logger.validationWarning(
        `${reflection.getFriendlyFullName()} (${ReflectionKind[reflection.kind]}), defined in ${where}, does not have any documentation`
      )
    }
  })
}
