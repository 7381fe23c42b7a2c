/**
 * Built-in canary prompts: TinyStories-style sentences (the bundled model's training
 * distribution), so canary hidden states look like those of real prompts.
 */
export const DEFAULT_CANARY_PROMPTS: readonly string[] = [
  'Once upon a time, there was a little girl named Lily. She loved to play outside in the park.',
  'One day, a small dog found a big red ball under a tree.',
  'Tom and his mom went to the store to buy some milk and bread.',
  'The sun was shining and the birds were singing in the garden.',
  'Sara had a pretty doll. She took it everywhere she went.',
  'There was a big bear who lived in the forest. He liked to eat honey.',
  'Ben wanted to build a tall tower with his blocks, but it fell down.',
  'Mia saw a butterfly in the sky. It was yellow and blue.',
  'Once there was a happy cat who liked to sleep in the sun all day.',
  'The little boy was sad because he lost his toy car at school.',
  'Anna and her friend made a cake for their grandma. It was very yummy.',
  'A kind old man gave the children some candy and they said thank you.',
  'Max the bunny hopped across the field to find some carrots.',
  'It was a rainy day, so Lucy stayed inside and read a book with her dad.',
  'The bird flew high over the hill and saw a shiny river.',
  'Jack was scared of the dark, so his mom gave him a little lamp.'
]

/** More sentences of the same kind, disjoint from the defaults: held-out evaluation prompts. */
export const HELD_OUT_PROMPTS: readonly string[] = [
  'Once upon a time, a little fish lived in a big blue sea with his family.',
  'Emma liked to draw pictures of flowers and trees with her crayons.',
  'The frog jumped into the pond and made a big splash.',
  'Sam found a shiny stone on the beach and showed it to his sister.',
  'Grandpa told Lily a story about a brave knight and a friendly dragon.',
  'The puppy was hungry, so it ran to the kitchen to find some food.',
  'Lucy and Tim played hide and seek in the big green garden.',
  'A little duck could not swim, but his friends helped him learn.',
  'The girl put on her red boots and jumped in all the puddles.',
  'One night, the moon was very bright and the stars were twinkling.',
  'Ben helped his dad wash the car, and they both got very wet.',
  'The old tree in the park had many apples, and the children picked them.',
  'Mom made warm soup for dinner, and everyone said it was the best.',
  'Tim saw a big truck on the road and waved at the driver.',
  'The little mouse was looking for cheese in the big house.',
  'Sue wanted to fly a kite, but there was no wind that day.'
]
